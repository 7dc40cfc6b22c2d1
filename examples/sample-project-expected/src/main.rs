// The emoji (two UTF-16 code units) before the call makes the edit's
// position depend on the negotiated position encoding.
fn main() {
    println!("👋 {}", sample::welcome("wörld"));
}
