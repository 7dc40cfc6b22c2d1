use crate::geometry::area;

/// Area of a square of side `side`.
pub fn square(side: u32) -> u32 {
    area(side, side)
}
