/**
 * The body of the delay proxy's thread (delay-proxy-thread.ts): the first message is the proxy's options,
 * the string 'close' stops it. Replies are ProxyThreadMessage values.
 */
import { errorMessage } from '../../shared/errors.ts';
import { startDelayProxy, type DelayProxy, type DelayProxyOptions } from './delay-proxy.ts';
import type { ProxyThreadMessage } from './delay-proxy-thread.ts';

declare const self: Worker;

const say = (message: ProxyThreadMessage) => self.postMessage(message);
let proxy: DelayProxy | undefined;

self.onmessage = async (event: MessageEvent<DelayProxyOptions | 'close'>) => {
  if (event.data === 'close') {
    await proxy?.close();
    say({ type: 'closed' });
    return;
  }
  try {
    proxy = await startDelayProxy(event.data);
    say({ type: 'listening', port: proxy.port, address: proxy.address });
  } catch (error) {
    say({ type: 'failed', message: errorMessage(error) });
  }
};
