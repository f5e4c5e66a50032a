// Original file: proto/edge_generator.proto


/**
 * [start, end) of a text in Unicode code points; kind names the placeholder ([NAME_1] for "name"), lowercase
 * letters, digits and _; empty is "private".
 */
export interface PrivateSpan {
  'start'?: (number);
  'end'?: (number);
  'kind'?: (string);
}

/**
 * [start, end) of a text in Unicode code points; kind names the placeholder ([NAME_1] for "name"), lowercase
 * letters, digits and _; empty is "private".
 */
export interface PrivateSpan__Output {
  'start': (number);
  'end': (number);
  'kind': (string);
}
