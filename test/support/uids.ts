/**
 * A block of session uids of its own for each engine a test starts: engines sharing uids would end
 * each other's processes (several test runs may share the machine, too).
 */
export function testSessionUids(): string {
  const first = 100_000 + Math.floor(Math.random() * 40_000) * 100;
  return `${first}-${first + 99}`;
}
