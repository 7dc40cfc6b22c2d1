from shapes.geometry import rect_area


def square(side: int) -> int:
    return rect_area(side, side)


def total(a: int, b: int) -> int:
    return rect_area(a, b) + square(a)
