#include "geometry.h"

int main(void) {
    int small = rect_area(2, 3);
    int large = rect_area(40, 50);
    return small + large > 0 ? 0 : 1;
}
