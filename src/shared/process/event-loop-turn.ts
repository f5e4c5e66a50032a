/**
 * One turn of the event loop: what arrived meanwhile (a socket's data, a timer) runs before the caller goes on.
 * onnxruntime-node runs a forward pass synchronously on the JavaScript thread, so between two passes, or two long
 * stretches of scoring, nothing else is read unless the caller lets the loop turn; a reply that came in during
 * a pass would otherwise wait for the next one too.
 *
 * @example
 * await model.forward(feeds, 1);
 * await eventLoopTurn(); // a routed step's reply that arrived during the pass is read now
 */
export function eventLoopTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
