/** The ONNX graph builder moved to src/shared (the edge builds a small graph at run time too); the tools keep importing it from here. */
export * from '../../shared/onnx-graph.ts';
