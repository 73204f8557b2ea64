/**
 * The failures of the libraries under the services, as catalogue errors. The error handler maps
 * any that reach it unhandled; services that record the failure first (the data plane audits a
 * failed provider call) map with the same functions, so one failure has one answer everywhere.
 */
import { BusConflictError, BusError } from '@vlt/bus';
import { UpstreamError } from '@vlt/upstream';
import { Errors, type AppError } from './errors.js';

/** A provider failure: 502 with the kind's code; an address the SSRF guard refused is a denial. */
export function upstreamAppError(err: UpstreamError, extra: AppError['extra'] = {}): AppError {
  switch (err.kind) {
    case 'ssrf_blocked':
      return Errors.policyDenied('destination address is not allowed', extra);
    case 'timeout':
      return Errors.upstreamTimeout(undefined, extra);
    case 'too_large':
      return Errors.upstreamBadResponse('provider response exceeds the size limit', extra);
    case 'bad_response':
      return Errors.upstreamBadResponse(undefined, extra);
    case 'unavailable':
      return Errors.upstreamUnavailable(undefined, extra);
    case 'busy':
      // This gateway's own limit, not the provider's failure: another pod, or this one a moment
      // later, can take the call.
      return Errors.upstreamBusy(undefined, { ...extra, retryAfter: 1, headers: { 'retry-after': '1' } });
  }
}

/** The bus (NATS or in-process) could not carry the request: transient, retry shortly. */
export function busAppError(err: BusError): AppError {
  const retry = { retryAfter: 1, headers: { 'retry-after': '1' } };
  if (err instanceof BusConflictError) {
    return Errors.unavailable('a concurrent update won; retry shortly', retry);
  }
  return Errors.unavailable('a backing service is unavailable; retry shortly', retry);
}

/** The catalogue error for a library failure, or null when `err` is none of them. */
export function libraryAppError(err: unknown): AppError | null {
  if (err instanceof UpstreamError) return upstreamAppError(err);
  if (err instanceof BusError) return busAppError(err);
  return null;
}
