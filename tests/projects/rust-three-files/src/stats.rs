use crate::geometry;

/// Sum of the areas of two rectangles.
pub fn total(a: (u32, u32), b: (u32, u32)) -> u32 {
    let first = geometry::area(a.0, a.1);
    let second = geometry::area(b.0, b.1);
    first + second
}
