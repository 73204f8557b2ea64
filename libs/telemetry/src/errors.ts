/** Typed errors of @vlt/telemetry, with stable codes. */
export type TelemetryErrorCode = 'VLT_TELEMETRY_ALREADY_STARTED';

export class TelemetryError extends Error {
  override readonly name = 'TelemetryError';
  readonly statusCode = 500;
  constructor(
    readonly code: TelemetryErrorCode,
    message: string,
  ) {
    super(message);
  }
}
