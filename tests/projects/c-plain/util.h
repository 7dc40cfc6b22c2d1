#ifndef UTIL_H
#define UTIL_H

/* Sum of two numbers. */
int add_numbers(int a, int b);

/* Twice the sum of two numbers. */
int double_sum(int a, int b);

#endif
