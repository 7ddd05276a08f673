/**
 * `instanceof` across the copies of oncemq that one process can load: an app that both imports and
 * requires the package runs its ES module build and its CommonJS build, each with its own classes
 * (docs/packaging.md). A class carrying `mark` (a `Symbol.for` key, so the same in both copies) is
 * matched by name: `value` is an instance when its prototype chain holds a class of either copy with
 * the mark and `type`'s name.
 */
export function isInstanceAcrossCopies(
  type: abstract new (...args: never) => unknown,
  value: unknown,
  mark: symbol,
): boolean {
  if (Function.prototype[Symbol.hasInstance].call(type, value)) return true;
  if (typeof value !== 'object' || value === null) return false;
  let proto = Object.getPrototypeOf(value) as object | null;
  while (proto !== null) {
    const other: unknown = Object.hasOwn(proto, 'constructor') ? proto.constructor : undefined;
    if (typeof other === 'function' && mark in other && other.name === type.name) return true;
    proto = Object.getPrototypeOf(proto) as object | null;
  }
  return false;
}
