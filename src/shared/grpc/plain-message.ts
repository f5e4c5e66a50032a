/**
 * Messages as proto-loader decodes them, minus its oneof markers, for printing as JSON. With
 * `oneofs: true` (which the generated types rely on) every oneof gets a virtual field naming its set
 * member: `"event":"token"` beside `token`, and for each proto3 `optional` field a synthetic oneof
 * `"_score":"score"` beside `score`. Neither is part of the message; a user reading `--json` output took
 * them for data. A key is dropped only when the contract declares a oneof of that name and its value names
 * a sibling field, so a real field that happens to share a oneof's name elsewhere is kept.
 *
 * @example
 * const plain = oneofMarkerStripper('edge_generator.proto');
 * JSON.stringify(plain({ token: { score: 0.5, _score: 'score' }, event: 'token' })); // {"token":{"score":0.5}}
 */
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_LOADER_OPTIONS } from './proto.ts';

/** protobufjs's name for a oneof's virtual field: snake_case to camelCase, a leading underscore kept. */
function virtualFieldName(oneof: string): string {
  return oneof[0] + oneof.slice(1).replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** The virtual field names of every oneof declared in `protoFile` (and the files it imports). */
export function oneofNames(protoFile: string): Set<string> {
  const definition = protoLoader.loadSync(protoFile, PROTO_LOADER_OPTIONS);
  const names = new Set<string>();
  for (const entry of Object.values(definition)) {
    const type = (entry as { type?: { oneofDecl?: { name: string }[] } }).type;
    for (const { name } of type?.oneofDecl ?? []) names.add(virtualFieldName(name));
  }
  return names;
}

export function oneofMarkerStripper(protoFile: string): (message: unknown) => unknown {
  const names = oneofNames(protoFile);
  const strip = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(strip);
    if (typeof value !== 'object' || value === null) return value;
    const record = value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const [key, field] of Object.entries(record)) {
      const marker = names.has(key) && typeof field === 'string' && field !== key && field in record;
      if (!marker) out[key] = strip(field);
    }
    return out;
  };
  return strip;
}
