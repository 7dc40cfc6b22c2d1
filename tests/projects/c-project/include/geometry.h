#ifndef GEOMETRY_H
#define GEOMETRY_H

/* Area of a width x height rectangle. */
int rect_area(int width, int height);

#endif
