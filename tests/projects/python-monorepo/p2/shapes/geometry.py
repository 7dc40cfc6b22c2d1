def rect_area(width: int, height: int) -> int:
    """Area of a width x height rectangle."""
    return width * height
