// Starting, finding and stopping the brokers' Java processes, one pid file each.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';

/** A failure the command reports in one paragraph, without a stack trace. */
export class BrokersError extends Error {
  name = 'BrokersError';
}

/** How long a broker may take to exit after SIGTERM before it is killed. */
export const STOP_GRACE_MS = 60_000;

/** The major version of `java` on the PATH; fails with what to install when there is none, or too old. */
export function requireJava(minimum = 17) {
  const result = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (result.error !== undefined) {
    throw new BrokersError(`java is not on the PATH (${result.error.message}); install a JDK ${minimum}+`);
  }
  const match = /version "(\d+)(?:\.(\d+))?/.exec(result.stderr);
  const major = match === null ? NaN : Number(match[1] === '1' ? match[2] : match[1]);
  if (!(major >= minimum)) {
    throw new BrokersError(`the brokers need Java ${minimum}+, and java -version says:\n${result.stderr}`);
  }
  return major;
}

/** The last `lines` lines of a Java program's output without its stack frames, for an error message. */
export function lastLines(text, lines = 25) {
  const messages = text
    .trimEnd()
    .split('\n')
    .filter((line) => !/^\s+(at |\.\.\. \d+ more)/.test(line));
  return messages.slice(-lines).join('\n');
}

/** The last lines of a log file, for an error message. */
export function logTail(file, lines = 25) {
  return existsSync(file) ? lastLines(readFileSync(file, 'utf8'), lines) : `(no log at ${file})`;
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
export function portOpen(port, host = '127.0.0.1', timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (open) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The command line of a live process, or undefined where /proc does not tell. */
function commandLine(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return undefined;
  }
}

/**
 * The pid in `pidFile` if that process still runs `mainClass` (a pid reused by another program does not
 * count); a stale pid file is removed.
 */
export function runningPid(pidFile, mainClass) {
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  if (Number.isInteger(pid) && pid > 0 && alive(pid)) {
    const line = commandLine(pid);
    if (line === undefined || line.includes(mainClass)) return pid;
  }
  rmSync(pidFile, { force: true });
  return undefined;
}

/**
 * Starts `java` detached from this process (the broker outlives the command), its output appended to
 * `logFile`, and writes its pid to `pidFile`.
 */
export function startJava({ jvm, classPath, mainClass, args, logFile, pidFile, cwd }) {
  mkdirSync(cwd, { recursive: true });
  const log = openSync(logFile, 'w');
  try {
    const child = spawn('java', [...jvm, '-cp', classPath, mainClass, ...args], {
      cwd,
      detached: true,
      stdio: ['ignore', log, log],
    });
    if (child.pid === undefined) throw new BrokersError(`java ${mainClass} did not start (see ${logFile})`);
    writeFileSync(pidFile, `${child.pid}\n`);
    child.unref();
    return child.pid;
  } finally {
    closeSync(log);
  }
}

/** Runs a Java tool to completion (the storage formatter, the admin tool); fails with its output. */
export function runJava({ jvm = [], classPath, mainClass, args, cwd }) {
  const result = spawnSync('java', [...jvm, '-cp', classPath, mainClass, ...args], { cwd, encoding: 'utf8' });
  if (result.status !== 0) {
    const output = lastLines(`${result.stdout}${result.stderr}`);
    throw new BrokersError(`java ${mainClass} ${args.join(' ')} exited with ${result.status}:\n${output}`);
  }
  return result.stdout;
}

/** The tails of a broker's logs, for an error message. */
function tails(logFiles) {
  return logFiles.map((file) => `--- the end of ${file}:\n${logTail(file, 25)}`).join('\n');
}

/**
 * Waits until `ready()` answers true, polling; fails early when the process `pid` exits, and after
 * `timeoutMs` otherwise — both with the tails of `logFiles`.
 */
export async function waitUntilReady({ what, pid, logFiles, ready, timeoutMs = 180_000 }) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  while (Date.now() < deadline) {
    if (!alive(pid)) throw new BrokersError(`${what} exited during start-up\n${tails(logFiles)}`);
    try {
      if (await ready()) return;
    } catch (error) {
      lastError = error;
    }
    await sleep(250);
  }
  const last = lastError instanceof Error ? ` (last check: ${lastError.message})` : '';
  throw new BrokersError(`${what} was not ready after ${timeoutMs / 1000} s${last}\n${tails(logFiles)}`);
}

/** SIGTERM, then up to `graceMs` for a clean exit, then SIGKILL. Returns how it ended. */
export async function stopProcess(pid, graceMs = STOP_GRACE_MS) {
  if (!alive(pid)) return 'gone';
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!alive(pid)) return 'terminated';
    await sleep(200);
  }
  process.kill(pid, 'SIGKILL');
  while (alive(pid)) await sleep(100);
  return 'killed';
}

/** The pid written in a lock file; undefined while it is being written or after it went away. */
function lockHolder(lockFile) {
  try {
    const pid = Number(readFileSync(lockFile, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Runs `fn` holding `lockFile` (created exclusively), so that two commands starting the same broker at
 * once (parallel test files) do not both start it; a lock left by a dead process is taken over.
 */
export async function withLock(lockFile, fn, timeoutMs = 300_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      writeFileSync(lockFile, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      const holder = lockHolder(lockFile);
      if (holder !== undefined && !alive(holder)) {
        rmSync(lockFile, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new BrokersError(`${lockFile} is held by process ${holder}`);
      await sleep(250);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lockFile, { force: true });
  }
}
