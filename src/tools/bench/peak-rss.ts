/**
 * The process's peak resident set so far, in MiB: Linux's VmHWM, since getrusage's ru_maxrss survives
 * exec and a child would report its parent's peak when that was higher.
 *
 * @example
 * console.log(`peak RSS ${peakRssMb().toFixed(0)} MiB`);
 */
import { readFileSync } from 'node:fs';

export function peakRssMb(): number {
  try {
    const hwm = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (hwm) return Number(hwm[1]) / 1024;
  } catch {
    // Not Linux: getrusage is the portable figure.
  }
  return process.resourceUsage().maxRSS / 1024;
}
