/**
 * The model's window, as every backend and the session checks hold a context to it: a context may fill it,
 * and a step must leave it a position to generate at.
 */
import { AppError } from '../../shared/errors.ts';

export function checkContext(length: number, maxContext: number | undefined): void {
  if (maxContext !== undefined && length > maxContext) {
    throw new AppError('OUT_OF_RANGE', `context of ${length} tokens exceeds the model's window of ${maxContext}`);
  }
}

/**
 * A step generates at the position after its context: refused (OUT_OF_RANGE) unless that position is inside
 * the window, so a session never holds more tokens than the model has positions.
 *
 * @example
 * checkRoomToGenerate(511, 512); // fine: the span starts at position 511, the window's last
 * checkRoomToGenerate(512, 512); // OUT_OF_RANGE: context of 512 tokens fills the model's window of 512 …
 */
export function checkRoomToGenerate(length: number, maxContext: number | undefined): void {
  checkContext(length, maxContext);
  if (maxContext !== undefined && length === maxContext) {
    throw new AppError('OUT_OF_RANGE', `context of ${length} tokens fills the model's window of ${maxContext}: no position is left to generate`);
  }
}
