/** Session dates of the contract: `YYYY-MM-DD hh:mm:ss`, UTC. */
export function sessionDate(date: Date): string {
  return date.toISOString().slice(0, 19).replace("T", " ");
}

/** Command dates of the contract: `YYYY-MM-DDThh:mm:ss.mmm+00:00`. */
export function commandDate(date: Date): string {
  return date.toISOString().replace("Z", "+00:00");
}
