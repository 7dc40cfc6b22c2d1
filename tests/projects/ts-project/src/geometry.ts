/** Area of a width x height rectangle. */
export function rectArea(width: number, height: number): number {
  return width * height;
}
