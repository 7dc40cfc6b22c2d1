#include "geometry.h"

int rect_area(int width, int height) {
    return width * height;
}
