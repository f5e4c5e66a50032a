"""Streams one generation from the edge's gRPC Generate service (proto/edge_generator.proto).

Runs with Debian's python3-grpcio and python3-protobuf; the modules it imports are generated with
Debian's protoc (see "Calling the services from other languages" in the README):

    python3 examples/python/edge_generate.py "Once upon a time" --max-new-tokens 24
    python3 examples/python/edge_generate.py "Tell me a story" --chat --system "You tell stories."

With --chat the prompt is the user's message of a conversation (after --system, when given): the edge
renders it with its model's chat template and generates the assistant's reply. Prints the generated text as it arrives (cloud tokens between [ and ] with --mark), then one line with
how the generation finished. Exits 1 with the error's code and message when the edge refuses or fails.
"""
import argparse
import sys

import grpc

import edge_generator_pb2
import edge_generator_pb2_grpc
import health_pb2
import health_pb2_grpc

SERVICE = "tokenrouter.edge.v1.EdgeGenerator"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt")
    parser.add_argument("--address", default="127.0.0.1:50061")
    parser.add_argument("--mode", default="joint", choices=["joint", "small_only", "llm_only"])
    # Left out of the request unless given (the field is `optional`): the router's own default τ applies.
    parser.add_argument("--threshold", type=float, help="routing threshold τ in [0, 1] (default: the router's default_threshold)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--token", help="the edge's access token, when it has one")
    parser.add_argument("--mark", action="store_true", help="put cloud tokens between [ and ]")
    parser.add_argument("--chat", action="store_true", help="send the prompt as a user message (the model's chat template applies)")
    parser.add_argument("--system", help="with --chat: a system message before it")
    args = parser.parse_args()

    metadata = [("authorization", f"Bearer {args.token}")] if args.token else []
    with grpc.insecure_channel(args.address) as channel:
        try:
            # The standard health service answers without the token: is the Generate service serving?
            health = health_pb2_grpc.HealthStub(channel)
            status = health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=5)
            print("health:", health_pb2.HealthCheckResponse.ServingStatus.Name(status.status), flush=True)

            generator = edge_generator_pb2_grpc.EdgeGeneratorStub(channel)
            request = edge_generator_pb2.GenerateRequest(mode=args.mode, max_new_tokens=args.max_new_tokens)
            if args.chat:
                # A conversation instead of a prompt: exactly one of the two.
                if args.system:
                    request.messages.add(role="system", content=args.system)
                request.messages.add(role="user", content=args.prompt)
            else:
                request.prompt = args.prompt
            if args.threshold is not None:
                request.threshold = args.threshold
            # Every call has a deadline; the stream ends with `done` or `error` before its status.
            for event in generator.Generate(request, timeout=60, metadata=metadata):
                kind = event.WhichOneof("event")
                if kind == "token":
                    text = event.token.text
                    print(f"[{text}]" if args.mark and event.token.source == "llm" else text, end="", flush=True)
                elif kind == "done":
                    m = event.done.metrics
                    print(f"\ndone: {event.done.finish_reason}, {m.tokens} tokens, {m.routed} routed, {m.fallback} fallback")
                else:
                    print(f"\nerror: {event.error.code}: {event.error.message}", file=sys.stderr)
                    return 1
        except grpc.RpcError as e:
            print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
