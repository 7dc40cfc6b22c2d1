import { rectArea } from "./geometry";

export function square(side: number): number {
  return rectArea(side, side);
}

export const total = rectArea(2, 3) + square(4);
