/** A setup that cannot be completed: its message is one line that says what to install or set. */
export class SetupError extends Error {}
