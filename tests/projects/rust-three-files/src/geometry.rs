/// Area of a `width` × `height` rectangle.
pub fn area(width: u32, height: u32) -> u32 {
    width * height
}
