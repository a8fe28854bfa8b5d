/**
 * The unprivileged uids isolated sessions run as (each with the gid of the same number). A uid is
 * handed out to one session at a time and comes back only after every process of it was ended and its
 * folders removed, so nothing of one session can reach the next that gets the uid. One whose
 * processes could not be ended is simply never given back.
 */
export class UidPool {
  private readonly queue: number[] = [];

  constructor(first: number, last: number) {
    // Handed out lowest first; released ones go to the back, so a uid rests as long as possible.
    for (let uid = first; uid <= last; uid++) this.queue.push(uid);
  }

  /** How many uids can be taken now. */
  get available(): number {
    return this.queue.length;
  }

  /** A free uid, or undefined when all are in use. */
  take(): number | undefined {
    return this.queue.shift();
  }

  give(uid: number): void {
    this.queue.push(uid);
  }
}
