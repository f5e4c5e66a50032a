/**
 * Strict decoding of gRPC requests. protobufjs (under proto-loader) is lenient where the protobuf spec is
 * not: it turns invalid UTF-8 in `string` fields into U+FFFD without a word, accepts a length that runs
 * past the end of the message, and reads a field whose wire type does not match its declaration. grpc-js,
 * for its part, answers a deserializer that throws with INTERNAL, blaming the server for the client's
 * bytes. So each request is first walked against its schema here (as protobuf's own parsers do for proto3
 * strings); one that fails reaches the handler as a marker, and `assertWellFormed` turns the marker into
 * INVALID_ARGUMENT with the reason. Unknown fields are skipped, as proto3 wants.
 *
 * @example
 * server.addService(strictService('edge_generator.proto', 'tokenrouter.edge.v1.EdgeGenerator'), handlers);
 * // first thing in the handler:
 * assertWellFormed(call.request); // throws AppError('INVALID_ARGUMENT', 'malformed GenerateRequest: field prompt (1) is not valid UTF-8')
 */
import { isUtf8 } from 'node:buffer';
import type { ServiceDefinition } from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { AppError, errorMessage } from '../errors.ts';
import { PROTO_LOADER_OPTIONS } from './proto.ts';

const MALFORMED = Symbol('malformed request');

/** The part of proto-loader's DescriptorProto objects this file reads. */
interface Descriptor {
  name: string;
  field: { name: string; number: number; label: string; type: string; typeName: string }[];
}

interface FieldSchema {
  name: string;
  type: string;
  repeated: boolean;
  message?: MessageSchema;
}

interface MessageSchema {
  name: string;
  fields: Map<number, FieldSchema>;
}

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;
/** Declared type → wire type; every other scalar (ints, bool, enum) is a varint. */
const WIRE_TYPE: Record<string, number> = {
  TYPE_DOUBLE: I64,
  TYPE_FIXED64: I64,
  TYPE_SFIXED64: I64,
  TYPE_FLOAT: I32,
  TYPE_FIXED32: I32,
  TYPE_SFIXED32: I32,
  TYPE_STRING: LEN,
  TYPE_BYTES: LEN,
  TYPE_MESSAGE: LEN,
};
const MAX_DEPTH = 64;

/** A position in the request bytes; every read checks the bounds. */
class Cursor {
  constructor(
    readonly bytes: Uint8Array,
    public pos: number,
    readonly end: number,
  ) {}

  varint(): number {
    const start = this.pos;
    let value = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new Error(`truncated varint at byte ${start}`);
      const b = this.bytes[this.pos++]!;
      value += (b & 0x7f) * 2 ** (7 * i);
      if (b < 0x80) return value;
    }
    throw new Error(`varint longer than 10 bytes at byte ${start}`);
  }

  skip(n: number, what: string): void {
    if (this.pos + n > this.end) throw new Error(`${what} at byte ${this.pos} needs ${n} bytes, ${this.end - this.pos} left`);
    this.pos += n;
  }
}

function checkMessage(bytes: Uint8Array, start: number, end: number, schema: MessageSchema, depth: number): void {
  if (depth > MAX_DEPTH) throw new Error(`messages nested more than ${MAX_DEPTH} deep`);
  const at = new Cursor(bytes, start, end);
  while (at.pos < end) {
    const tagAt = at.pos;
    const tag = at.varint();
    const number = Math.floor(tag / 8);
    const wire = tag % 8;
    if (number === 0) throw new Error(`field number 0 at byte ${tagAt}`);
    const field = schema.fields.get(number);
    const label = field ? `field ${field.name} (${number})` : `field ${number}`;
    let body = at.pos;
    if (wire === VARINT) at.varint();
    else if (wire === I64) at.skip(8, label);
    else if (wire === I32) at.skip(4, label);
    else if (wire === LEN) {
      const length = at.varint();
      body = at.pos;
      at.skip(length, label);
    } else throw new Error(`invalid wire type ${wire} at byte ${tagAt}`);
    if (!field) continue;
    const expected = WIRE_TYPE[field.type] ?? VARINT;
    if (wire === expected) {
      if (field.type === 'TYPE_STRING' && !isUtf8(bytes.subarray(body, at.pos))) throw new Error(`${label} is not valid UTF-8`);
      if (field.message) checkMessage(bytes, body, at.pos, field.message, depth + 1);
    } else if (wire === LEN && field.repeated && expected !== LEN) {
      checkPacked(bytes, body, at.pos, expected, label);
    } else {
      throw new Error(`${label} has wire type ${wire}; its type ${field.type.replace('TYPE_', '').toLowerCase()} needs ${expected}`);
    }
  }
}

/** A packed repeated scalar: a run of varints, or of fixed-size values, filling the field exactly. */
function checkPacked(bytes: Uint8Array, start: number, end: number, wire: number, label: string): void {
  if (wire === VARINT) {
    const at = new Cursor(bytes, start, end);
    while (at.pos < end) at.varint();
    return;
  }
  const size = wire === I64 ? 8 : 4;
  if ((end - start) % size !== 0) throw new Error(`${label} is ${end - start} bytes, not a whole number of ${size}-byte values`);
}

/** `typeName` as protobuf scopes it: relative names are searched from `scope` outwards. */
function resolveType(pkg: protoLoader.PackageDefinition, scope: string, typeName: string): string {
  if (typeName.startsWith('.')) return typeName.slice(1);
  for (let s = scope; ; s = s.slice(0, Math.max(0, s.lastIndexOf('.')))) {
    const candidate = s ? `${s}.${typeName}` : typeName;
    if (candidate in pkg) return candidate;
    if (!s) throw new Error(`cannot resolve message type ${typeName} from ${scope}`);
  }
}

function buildSchema(pkg: protoLoader.PackageDefinition, fullName: string, built: Map<string, MessageSchema>): MessageSchema {
  const known = built.get(fullName);
  if (known) return known;
  const definition = pkg[fullName] as protoLoader.ProtobufTypeDefinition | undefined;
  if (definition?.format !== 'Protocol Buffer 3 DescriptorProto') throw new Error(`${fullName} is not a message type`);
  const descriptor = definition.type as Descriptor;
  const schema: MessageSchema = { name: descriptor.name, fields: new Map() };
  built.set(fullName, schema); // before the fields, so recursive types terminate
  for (const f of descriptor.field) {
    const message = f.type === 'TYPE_MESSAGE' ? buildSchema(pkg, resolveType(pkg, fullName, f.typeName), built) : undefined;
    schema.fields.set(f.number, { name: f.name, type: f.type, repeated: f.label === 'LABEL_REPEATED', message });
  }
  return schema;
}

/**
 * The service `serviceName` of `protoFile` (loaded with the project's proto-loader options), with every
 * request deserializer checking the bytes against the schema first.
 */
export function strictService(protoFile: string, serviceName: string): ServiceDefinition {
  const pkg = protoLoader.loadSync(protoFile, PROTO_LOADER_OPTIONS);
  const service = pkg[serviceName] as protoLoader.ServiceDefinition | undefined;
  if (!service) throw new Error(`${protoFile} has no service ${serviceName}`);
  const built = new Map<string, MessageSchema>();
  const strict: protoLoader.ServiceDefinition = {};
  for (const [name, method] of Object.entries(service)) {
    const schema = buildSchema(pkg, resolveType(pkg, serviceName, (method.requestType.type as Descriptor).name), built);
    const lenient = method.requestDeserialize;
    strict[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          checkMessage(bytes, 0, bytes.length, schema, 0);
          return lenient(bytes);
        } catch (e) {
          return { [MALFORMED]: `malformed ${schema.name}: ${errorMessage(e)}` };
        }
      },
    };
  }
  return strict as unknown as ServiceDefinition;
}

/** Throws INVALID_ARGUMENT, with the reason, when `message` is the marker of a request that failed decoding. */
export function assertWellFormed(message: unknown): void {
  if (typeof message === 'object' && message !== null && MALFORMED in message) {
    throw new AppError('INVALID_ARGUMENT', String((message as { [MALFORMED]: string })[MALFORMED]));
  }
}
