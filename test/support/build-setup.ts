import type { TestProject } from 'vitest/node';
import { compilePackage } from './built-package.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The package compiled once for the run (see `buildPackage`). */
    builtPackageDir: string;
  }
}

/**
 * Vitest global setup: compiles the package once for every test file that runs the CLI or separate
 * processes, instead of one compilation per file (several at once on two cores outran the hook timeout).
 */
export default function setup(project: TestProject): () => void {
  const build = compilePackage();
  project.provide('builtPackageDir', build.dir);
  return () => {
    build.remove();
  };
}
