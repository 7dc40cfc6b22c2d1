#include <stdio.h>

#include "util.h"

int main(void) {
    int sum = add_numbers(1, 2);
    printf("%d %d\n", sum, double_sum(3, 4));
    return add_numbers(sum, -3);
}
