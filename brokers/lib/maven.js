// `fetch`: Maven copies a broker's jars (its pom's runtime dependencies) into the cache, once.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import process from 'node:process';
import { BrokersError, lastLines } from './java-process.js';

/** Whether the jars of this layout are in the cache. */
export function fetched(layout) {
  return existsSync(layout.lib) && readdirSync(layout.lib).some((file) => file.endsWith('.jar'));
}

/**
 * Copies the jars with `mvn dependency:copy-dependencies` into a sibling folder, then renames it into
 * place, so an interrupted fetch never leaves a half-filled cache behind. A cache already there is kept.
 */
export function fetchJars(layout, log) {
  if (fetched(layout)) {
    log(`${layout.name} ${layout.version}: jars already in ${layout.lib}`);
    return false;
  }
  const partial = `${layout.lib}.partial-${process.pid}`;
  mkdirSync(dirname(layout.lib), { recursive: true });
  rmSync(partial, { recursive: true, force: true });
  log(`${layout.name} ${layout.version}: fetching jars with Maven into ${layout.lib}`);
  const result = spawnSync(
    'mvn',
    [
      '--batch-mode',
      '--quiet',
      '--file',
      layout.pom,
      'dependency:copy-dependencies',
      '-DincludeScope=runtime',
      `-DoutputDirectory=${partial}`,
    ],
    { encoding: 'utf8' },
  );
  if (result.error !== undefined) {
    throw new BrokersError(
      `mvn could not run (${result.error.message}); install Maven 3.8+ (apt-get install maven)`,
    );
  }
  if (result.status !== 0) {
    rmSync(partial, { recursive: true, force: true });
    const output = lastLines(`${result.stdout}${result.stderr}`);
    throw new BrokersError(
      `Maven could not fetch ${layout.name} ${layout.version} (is Maven Central reachable?):\n${output}`,
    );
  }
  renameSync(partial, layout.lib);
  return true;
}
