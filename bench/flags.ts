/** Reading a suite's `--flag key=value` options. */

/** The whole number `flags[name]`, at least `min`, else `fallback` when absent; anything else throws, naming the flag. */
export function wholeFlag(
  flags: Readonly<Record<string, string>>,
  name: string,
  fallback: number,
  min = 1,
): number {
  const text = flags[name];
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) {
    throw new Error(`--flag ${name}=${text}: expected a whole number >= ${min}`);
  }
  return value;
}

/** The comma-separated names of `flags[name]`, each one of `known`; `fallback` when absent. */
export function listFlag(
  flags: Readonly<Record<string, string>>,
  name: string,
  known: readonly string[],
  fallback: readonly string[],
): string[] {
  const text = flags[name];
  if (text === undefined) return [...fallback];
  const names = text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  for (const entry of names) {
    if (!known.includes(entry)) {
      throw new Error(`--flag ${name}: unknown '${entry}'; expected some of ${known.join(', ')}`);
    }
  }
  if (names.length === 0) throw new Error(`--flag ${name}: name at least one of ${known.join(', ')}`);
  return names;
}
