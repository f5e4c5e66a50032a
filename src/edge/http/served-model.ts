/**
 * The one check of a request's `model` against the model this edge serves (its --served-model-name, or
 * the edge pack's folder name): the OpenAI routes and `/tokenize`, `/detokenize` refuse another name the
 * same way, a 404 that names both (OpenAI's `model_not_found`).
 *
 * @example
 * checkServedModel(body.model, 'stories260k-3l'); // throws for "gpt-4", passes for the served name
 */
import { OpenAIParamError } from './openai/openai-errors.ts';

export function checkServedModel(requested: string, served: string): void {
  if (requested !== served) {
    throw new OpenAIParamError(
      'model',
      `the model ${JSON.stringify(requested)} does not exist on this edge; it serves ${served}`,
      'NOT_FOUND',
      'model_not_found',
    );
  }
}
