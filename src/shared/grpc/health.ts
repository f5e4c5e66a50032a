/**
 * The standard gRPC health service (grpc.health.v1): `Check` answers the current status of a service
 * name ("" = the whole server), `Watch` streams every change until the call ends or the server stops.
 *
 * @example
 * const health = new HealthService({ '': 'NOT_SERVING' });
 * server.addService(healthService, health.handlers);
 * health.set('', 'SERVING');
 */
import { status as Status, type ServerWritableStream } from '@grpc/grpc-js';
import type { HealthHandlers, HealthCheckRequest__Output, HealthCheckResponse } from './proto.ts';

export type ServingStatus = 'SERVING' | 'NOT_SERVING';

/**
 * Longest service name answered. Real names are a package and a service (`tokenrouter.edge.v1.EdgeGenerator`);
 * a longer one is refused, so that no reply echoes a name larger than the metadata limit (8 KB).
 */
export const MAX_SERVICE_NAME_CHARS = 200;

/** INVALID_ARGUMENT for a name past the limit, NOT_FOUND for an unknown one; undefined for a known one. */
function refusal(service: string, known: boolean): { code: Status; details: string } | undefined {
  if (service.length > MAX_SERVICE_NAME_CHARS) {
    return { code: Status.INVALID_ARGUMENT, details: `service name is ${service.length} characters; the limit is ${MAX_SERVICE_NAME_CHARS}` };
  }
  return known ? undefined : { code: Status.NOT_FOUND, details: `unknown service ${JSON.stringify(service)}` };
}

export class HealthService {
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly watchers = new Set<{ service: string; call: ServerWritableStream<HealthCheckRequest__Output, HealthCheckResponse> }>();

  constructor(initial: Record<string, ServingStatus> = {}) {
    for (const [service, status] of Object.entries(initial)) this.statuses.set(service, status);
  }

  set(service: string, status: ServingStatus): void {
    this.statuses.set(service, status);
    for (const watcher of this.watchers) if (watcher.service === service) watcher.call.write({ status });
  }

  /** Every service NOT_SERVING, then each Watch stream ends (server shutdown). */
  shutdown(): void {
    for (const service of this.statuses.keys()) this.set(service, 'NOT_SERVING');
    for (const { call } of this.watchers) call.end();
    this.watchers.clear();
  }

  readonly handlers: HealthHandlers = {
    Check: (call, callback) => {
      const status = this.statuses.get(call.request.service);
      const refused = refusal(call.request.service, status !== undefined);
      if (refused || !status) return callback(refused ?? null);
      callback(null, { status });
    },
    Watch: (call) => {
      // An unknown name is watched (it may be set later, as the protocol says); one past the limit is not.
      const refused = refusal(call.request.service, true);
      if (refused) return void call.emit('error', refused);
      const watcher = { service: call.request.service, call };
      this.watchers.add(watcher);
      call.write({ status: this.statuses.get(call.request.service) ?? 'SERVICE_UNKNOWN' });
      call.on('cancelled', () => this.watchers.delete(watcher));
    },
  };
}
