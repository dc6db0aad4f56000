/**
 * The platform's one error hierarchy. Domain code throws these; `api/errors.ts`
 * maps them to HTTP in one place, and ingest maps them to device log entries.
 * The message is what a client sees, so it is written for the client.
 */
export abstract class PlatformError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** One of several problems a request has, named by its field. */
export interface Problem {
  field: string;
  problem: string;
}

/**
 * A request or command that breaks a rule of the contract. Message:
 * `ERR - <field> <why>`. A check that finds several problems at once keeps
 * them all in `problems`, the first one also being the message.
 */
export class ValidationError extends PlatformError {
  constructor(
    message: string,
    readonly problems?: Problem[],
  ) {
    super(message.startsWith('ERR - ') ? message : `ERR - ${message}`);
  }
  static field(field: string, why: string): ValidationError {
    return new ValidationError(`ERR - ${field} ${why}`);
  }
  /** Every problem found, at least one. */
  static all(problems: [Problem, ...Problem[]]): ValidationError {
    const [first] = problems;
    return new ValidationError(`ERR - ${first.field} ${first.problem}`, problems);
  }
}

/** A rule of the contract that is refused with a fixed text, such as `All existing widgets must be provided`. */
export class UnprocessableError extends PlatformError {}

export class NotFoundError extends PlatformError {
  constructor(message = 'Not Found') {
    super(message);
  }
}

export class UnauthorizedError extends PlatformError {
  constructor(message = 'Unauthorized') {
    super(message);
  }
}

export class ForbiddenError extends PlatformError {
  constructor(message = 'Forbidden') {
    super(message);
  }
}

/** The state changed under the caller in a way that does not commute with its change. */
export class ConflictError extends PlatformError {}

/** The event store refused an append because the stream moved past the expected revision. */
export class ConcurrencyError extends ConflictError {
  constructor(
    readonly streamId: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`Stream ${streamId} is at revision ${actual}, expected ${expected}`);
  }
}

/** `If-Match` named a revision that is no longer current. */
export class PreconditionFailedError extends PlatformError {}

export class PayloadTooLargeError extends PlatformError {}

/** A request the server cannot read at all (a tampered cursor, a body that does not decode): 400. */
export class BadRequestError extends PlatformError {}

/** A third party the request depends on (a network server) said no, or did not answer in time: 502. */
export class BadGatewayError extends PlatformError {}

/** A body in an encoding the server does not speak: 415. */
export class UnsupportedMediaTypeError extends PlatformError {}

/** Too many requests of one kind from one caller; `retryAfterSeconds` says when to try again: 429. */
export class TooManyRequestsError extends PlatformError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/** The path names an operation, but not for this method; `allowed` lists the methods it has: 405. */
export class MethodNotAllowedError extends PlatformError {
  constructor(readonly allowed: string[]) {
    super('Method Not Allowed');
  }
}

/** The write is stored, but its read models did not follow within the wait bound. */
export class UnavailableError extends PlatformError {}
