import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { promisify } from 'node:util';
import { TcpProxy } from '../testing/tcp-proxy.js';
import { UsageError } from './command.js';
import { seededRandom } from './seeded-random.js';

const run = promisify(execFile);

/**
 * What runs inside each host's namespace: one listener on the namespace's loopback per service port,
 * forwarding over the host's link to the machine's end of it, where a {@link TcpProxy} forwards on to
 * the service. The processes of the host reach `127.0.0.1:<port>` as they would on one machine (a
 * Kafka client, too, dials the address its broker advertises), and every byte crosses the link.
 * Arguments: the machine's end of the link, then `<port>:<port there>` pairs. Plain JavaScript, run
 * with `node -e`: nothing to build or install inside the namespace.
 */
const FORWARDER = `
const net = require('node:net');
const [gateway, ...pairs] = process.argv.slice(1);
let listening = 0;
for (const pair of pairs) {
  const [port, there] = pair.split(':').map(Number);
  net.createServer((client) => {
    const upstream = net.connect({ host: gateway, port: there });
    const end = () => { client.destroy(); upstream.destroy(); };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream).pipe(client);
  }).listen(port, '127.0.0.1', () => {
    if (++listening === pairs.length) process.stdout.write('ready\\n');
  });
}
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
`;

/** How long a host's forwarder may take to listen. */
const FORWARDER_READY_MS = 10_000;

/** One test host: a network namespace, the veth link to it, and the forwarding over that link. */
interface Host {
  readonly namespace: string;
  /** The machine's end of the link: taking it down cuts the host off. */
  readonly link: string;
  readonly proxies: TcpProxy[];
  forwarder?: ChildProcess;
  cut: boolean;
}

/** When and how long hosts are cut off during a run. */
export interface HostCutsConfig {
  /** A host cut off every this long (on average; drawn between half and one and a half times it). */
  readonly everyMs: number;
  /** A cut host stays cut off this long: longer than the lease or the broker's ack wait. */
  readonly forMs: number;
  readonly seed: string;
}

/**
 * Several hosts on one machine for a chaos run: each a network namespace (`ip netns`) joined to the
 * machine by a veth link, its processes reaching the machine's broker and database through that link
 * only. Cutting a host takes its link down: its connections hang, as across a real network that
 * failed (no reset, nothing closes), and come back when the link does. Needs root and iproute2.
 */
export class TestHosts {
  readonly #hosts: Host[];
  readonly #cuts = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Hosts cut off so far. */
  cuts = 0;

  private constructor(hosts: Host[]) {
    this.#hosts = hosts;
  }

  /**
   * Makes `count` hosts whose loopback forwards `ports` (the broker's, through the run's proxy, and the
   * database's) to the machine's services; everything made is removed again if a step fails.
   */
  static async create(count: number, ports: readonly number[]): Promise<TestHosts> {
    await checkHostsAvailable();
    const id = randomBytes(3).toString('hex');
    // a /30 per host in one 10.x block of the run's, so that runs side by side do not share addresses
    const block = randomInt(64, 250);
    const made = new TestHosts([]);
    try {
      for (let index = 0; index < count; index++) {
        made.#hosts.push(await makeHost(`omq-${id}-${index}`, `omq${id}${index}`, block, index, ports));
      }
    } catch (error) {
      await made.close();
      throw error;
    }
    return made;
  }

  get size(): number {
    return this.#hosts.length;
  }

  /**
   * The command prefix that runs a program on host `index` (of the hosts, round robin), once the host
   * is on the network: a process started on a host that is cut off could not reach anything.
   */
  async place(index: number): Promise<string[]> {
    const host = this.#hosts[index % this.#hosts.length];
    if (host === undefined) return [];
    while (host.cut) await Promise.all(this.#cuts);
    return ['ip', 'netns', 'exec', host.namespace];
  }

  /** Cuts hosts off, one at a time, on a seeded schedule until {@link close}. */
  startCuts(config: HostCutsConfig): void {
    const random = seededRandom(`${config.seed}\u0000hosts`);
    const next = (): void => {
      this.#timer = setTimeout(
        () => {
          this.cut(Math.floor(random() * this.#hosts.length), config.forMs);
          next();
        },
        Math.round(config.everyMs * (0.5 + random())),
      );
    };
    next();
  }

  /**
   * Takes host `index`'s link down for `ms`, then up again. A host already cut is left as it is, and
   * the last host up is never cut (the run could not settle while it is off).
   */
  cut(index: number, ms: number): void {
    const up = this.#hosts.filter((host) => !host.cut);
    const host = this.#hosts[index % this.#hosts.length];
    if (this.#stopped || host === undefined || host.cut || up.length <= 1) return;
    host.cut = true;
    this.cuts++;
    const cut = (async () => {
      await ip('link', 'set', host.link, 'down');
      await new Promise((resolve) => setTimeout(resolve, ms));
      await ip('link', 'set', host.link, 'up');
    })()
      .catch(() => undefined)
      .finally(() => {
        host.cut = false;
        this.#cuts.delete(cut);
      });
    this.#cuts.add(cut);
  }

  /** Stops cutting and waits until every cut host is back on the network. */
  async stopCuts(): Promise<void> {
    clearTimeout(this.#timer);
    this.#stopped = true;
    await Promise.all(this.#cuts);
  }

  /** Removes every namespace, link and proxy of the hosts. */
  async close(): Promise<void> {
    await this.stopCuts();
    for (const host of this.#hosts.splice(0)) await removeHost(host);
  }
}

/** Stops a host's forwarding and deletes its namespace, whatever of it was made. */
async function removeHost(host: Host): Promise<void> {
  host.forwarder?.kill('SIGKILL');
  await Promise.all(host.proxies.map((proxy) => proxy.close()));
  // deleting the namespace deletes its end of the link, and with it the machine's end
  await ip('netns', 'del', host.namespace).catch(() => undefined);
}

/** Refuses `--hosts` where namespaces cannot be made: not root, or no iproute2. */
export async function checkHostsAvailable(): Promise<void> {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) {
    throw new UsageError('--hosts makes network namespaces: it needs Linux and root');
  }
  try {
    await run('ip', ['netns', 'list']);
  } catch {
    throw new UsageError('--hosts makes network namespaces with iproute2: `ip netns` is not available');
  }
}

async function ip(...args: string[]): Promise<void> {
  await run('ip', args);
}

async function makeHost(
  namespace: string,
  link: string,
  block: number,
  index: number,
  ports: readonly number[],
): Promise<Host> {
  const here = `10.${block}.${index}.1`;
  const there = `10.${block}.${index}.2`;
  const peer = `${link}p`;
  await ip('netns', 'add', namespace);
  const host: Host = { namespace, link, proxies: [], cut: false };
  try {
    await ip('link', 'add', link, 'type', 'veth', 'peer', 'name', peer);
    await ip('link', 'set', peer, 'netns', namespace);
    await ip('addr', 'add', `${here}/30`, 'dev', link);
    await ip('link', 'set', link, 'up');
    const inside = (...args: string[]): Promise<void> => ip('netns', 'exec', namespace, 'ip', ...args);
    await inside('addr', 'add', `${there}/30`, 'dev', peer);
    await inside('link', 'set', peer, 'up');
    await inside('link', 'set', 'lo', 'up');
    const pairs: string[] = [];
    for (const port of new Set(ports)) {
      const proxy = await TcpProxy.start({ targetHost: '127.0.0.1', targetPort: port, listenHost: here });
      host.proxies.push(proxy);
      pairs.push(`${port}:${proxy.port}`);
    }
    host.forwarder = await startForwarder(namespace, here, pairs);
    return host;
  } catch (error) {
    await removeHost(host);
    throw error;
  }
}

async function startForwarder(namespace: string, gateway: string, pairs: string[]): Promise<ChildProcess> {
  const child = spawn(
    'ip',
    ['netns', 'exec', namespace, process.execPath, '-e', FORWARDER, gateway, ...pairs],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`the forwarder of ${namespace} did not listen: ${stderr}`));
    }, FORWARDER_READY_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      reject(new Error(`the forwarder of ${namespace} exited with ${code}: ${stderr}`));
    });
  }).catch((error: unknown) => {
    child.kill('SIGKILL');
    throw error;
  });
  return child;
}
