/** One root error, with specific subclasses that say what happened (like the Python package). */
export class BlackboxError extends Error {
  override readonly name: string = "BlackboxError";
}

/** A capture (or a value in it) breaks the contract; `path` names the field, e.g. `input.requestPayload.ids[1]`. */
export class ContractError extends BlackboxError {
  override readonly name = "ContractError";
  readonly path: string;

  constructor(message: string, path = "") {
    super(path ? `${path}: ${message}` : message);
    this.path = path;
  }
}

/** A value cannot be written as Avro losslessly. */
export class SerializationError extends BlackboxError {
  override readonly name = "SerializationError";
}

/** The recorder was misconfigured (never raised from a capture call on the agent's path). */
export class ConfigurationError extends BlackboxError {
  override readonly name = "ConfigurationError";
}
