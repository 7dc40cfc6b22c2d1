#include "util.h"

int add_numbers(int a, int b) {
    return a + b;
}

int double_sum(int a, int b) {
    return 2 * add_numbers(a, b);
}
