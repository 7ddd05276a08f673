/**
 * Wraps `target` so that every method call through the wrapper is counted by name (ledgers, Redis
 * adapters); `calls.clear()` starts the count again.
 */
export function counting<L extends object>(target: L): { ledger: L; calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const proxy = new Proxy(target, {
    get(object, prop) {
      const value: unknown = Reflect.get(object, prop, object);
      if (typeof value !== 'function' || typeof prop !== 'string') return value;
      return (...args: unknown[]): unknown => {
        calls.set(prop, (calls.get(prop) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(object, args);
      };
    },
  });
  return { ledger: proxy, calls };
}
