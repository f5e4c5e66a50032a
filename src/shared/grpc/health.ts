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
      if (!status) return callback({ code: Status.NOT_FOUND, details: `unknown service ${JSON.stringify(call.request.service)}` });
      callback(null, { status });
    },
    Watch: (call) => {
      const watcher = { service: call.request.service, call };
      this.watchers.add(watcher);
      call.write({ status: this.statuses.get(call.request.service) ?? 'SERVICE_UNKNOWN' });
      call.on('cancelled', () => this.watchers.delete(watcher));
    },
  };
}
