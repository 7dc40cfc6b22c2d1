def fence_length(width: int, height: int) -> int:
    """Fence around a width x height field."""
    return 2 * (width + height)


def two_fields(a: int, b: int) -> int:
    return fence_length(a, b) + fence_length(b, a)
