// Where the brokers' jars, configuration, logs and scratch data live.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

/** This folder (brokers/): the poms and the configuration templates. */
export const BROKERS_SOURCE = fileURLToPath(new URL('..', import.meta.url));

/** The cache of jars and the run directories: `$ONCEMQ_BROKERS_DIR`, else `~/.cache/oncemq/brokers`. */
export function brokersHome() {
  const configured = process.env.ONCEMQ_BROKERS_DIR;
  if (configured !== undefined && configured !== '') return configured;
  const cache = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(cache, 'oncemq', 'brokers');
}

/** The exact version a broker's pom pins (`<broker.version>`): the pom is the one place it is written. */
export function pinnedVersion(name) {
  const pom = readFileSync(join(BROKERS_SOURCE, name, 'pom.xml'), 'utf8');
  const match = /<broker\.version>([^<]+)<\/broker\.version>/.exec(pom);
  if (match === null) throw new Error(`brokers/${name}/pom.xml pins no <broker.version>`);
  return match[1];
}

/**
 * The directories of one broker: `lib` (jars, kept across runs, shared by every checkout on the machine)
 * and `run` (pid files, logs, configuration and scratch data of the running broker).
 */
export function brokerLayout(name) {
  const version = pinnedVersion(name);
  const home = brokersHome();
  const lib = join(home, `${name}-${version}`, 'lib');
  const run = join(home, 'run', name);
  return {
    name,
    version,
    pom: join(BROKERS_SOURCE, name, 'pom.xml'),
    lib,
    /** The Java class path of the fetched jars. */
    classPath: join(lib, '*'),
    run,
    data: join(run, 'data'),
    source: (file) => join(BROKERS_SOURCE, name, file),
    /** Where `start` records the digest of the configuration it started the broker with. */
    stamp: join(run, 'configuration.sha256'),
    pidFile: (id) => join(run, `${id}.pid`),
    logFile: (id) => join(run, `${id}.log`),
  };
}

/**
 * A digest of the broker's configuration in this checkout (every file of `brokers/<name>/`: properties,
 * pom with its version): a broker that runs with another is started again by `start`.
 */
export function configurationDigest(name) {
  const folder = join(BROKERS_SOURCE, name);
  const hash = createHash('sha256');
  for (const file of readdirSync(folder).sort()) {
    if (!statSync(join(folder, file)).isFile()) continue;
    hash.update(`${file}\0`);
    hash.update(readFileSync(join(folder, file)));
    hash.update('\0');
  }
  return hash.digest('hex');
}
