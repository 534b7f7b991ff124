/**
 * The Recorder's sealing threads: jobs handed round-robin to `size` worker threads. A thread is
 * referenced only while it has work, so an idle pool never keeps the agent's process alive.
 */
import { Worker } from "node:worker_threads";
import type { Signer } from "./keys.js";
import type { SealDone, SealJob } from "./seal-thread.js";

interface Slot {
  readonly worker: Worker;
  pending: number;
  dead: string | undefined;
}

export class SealPool {
  readonly #slots: Slot[];
  readonly #waiting = new Map<number, { resolve: (done: SealDone) => void; slot: Slot }>();
  #next = 0;
  #ids = 0;

  constructor(size: number, signer: Signer) {
    this.#slots = Array.from({ length: size }, () => {
      const worker = new Worker(new URL("./seal-thread.js", import.meta.url), { workerData: signer.forThread() });
      const slot: Slot = { worker, pending: 0, dead: undefined };
      worker.on("message", (done: SealDone) => this.#settle(done));
      worker.on("error", (error: unknown) => this.#fail(slot, String(error)));
      worker.on("exit", (code) => this.#fail(slot, `sealing thread exited (${code})`));
      worker.unref();
      return slot;
    });
  }

  run(job: Omit<SealJob, "id">): Promise<SealDone> {
    const slot = this.#slots[this.#next++ % this.#slots.length]!;
    const id = ++this.#ids;
    if (slot.dead !== undefined) return Promise.resolve({ id, error: slot.dead });
    return new Promise<SealDone>((resolve) => {
      this.#waiting.set(id, { resolve, slot });
      if (slot.pending++ === 0) slot.worker.ref();
      slot.worker.postMessage({ ...job, id });
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.#slots.map((slot) => slot.worker.terminate()));
  }

  #settle(done: SealDone): void {
    const waiting = this.#waiting.get(done.id);
    if (waiting === undefined) return;
    this.#waiting.delete(done.id);
    if (--waiting.slot.pending === 0) waiting.slot.worker.unref();
    waiting.resolve(done);
  }

  #fail(slot: Slot, message: string): void {
    slot.dead ??= message;
    for (const [id, waiting] of this.#waiting) if (waiting.slot === slot) this.#settle({ id, error: message });
  }
}
