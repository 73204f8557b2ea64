/**
 * The Kubernetes manifests in deploy/k8s: every document must pass the Kubernetes schema for its
 * kind, and the properties production depends on (secret separation, probes, limits, hardening,
 * network isolation, routing) must hold. Pure file reading: no cluster, no network.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler, type IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget, type IPodDisruptionBudget } from 'kubernetes-models/policy/v1';
import {
  Ingress,
  NetworkPolicy,
  type IIngress,
  type INetworkPolicy,
} from 'kubernetes-models/networking.k8s.io/v1';
import {
  ConfigMap,
  Namespace,
  Secret,
  Service,
  ServiceAccount,
  type IConfigMap,
  type ISecret,
  type IService,
} from 'kubernetes-models/v1';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const K8S_DIR = join(ROOT, 'deploy', 'k8s');

const NAMESPACE = 'vlt-gateway';
const IMAGE = 'ghcr.io/vlt-gateway/vlt-gateway:0.1.0';
const FORBIDDEN_FOR_DATA_PLANE = ['DATABASE_URL', 'VLT_MASTER_KEY'];
const PRIVATE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'];

type PodSpec = NonNullable<NonNullable<IDeployment['spec']>['template']['spec']>;
type Container = PodSpec['containers'][number];
type Probe = NonNullable<Container['readinessProbe']>;
type Rule = NonNullable<NonNullable<INetworkPolicy['spec']>['egress']>[number];
type Peer = NonNullable<Rule['to']>[number];
type RulePort = NonNullable<Rule['ports']>[number];
type LabelSelector = NonNullable<Peer['podSelector']>;

/** Every kind the manifests may contain, keyed by `apiVersion/kind`; anything else is an error. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'networking.k8s.io/v1/Ingress': Ingress,
};

interface Manifest {
  file: string;
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

function loadManifests(): Manifest[] {
  const files = readdirSync(K8S_DIR)
    .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
    .sort();
  const out: Manifest[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(readFileSync(join(K8S_DIR, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const value = doc.toJS() as Manifest | null;
      if (value === null) continue; // an empty document, e.g. a trailing ---
      out.push({ ...value, file });
    }
  }
  return out;
}

const manifests = loadManifests();

function ofKind<T>(kind: string): T[] {
  return manifests.filter((m) => m.kind === kind) as unknown as T[];
}

function named<T extends { metadata?: { name?: string } }>(items: T[], name: string): T {
  const found = items.find((i) => i.metadata?.name === name);
  if (!found) throw new Error(`no object named ${name}`);
  return found;
}

const deployments = ofKind<IDeployment>('Deployment');
const secrets = ofKind<ISecret>('Secret');
const configMaps = ofKind<IConfigMap>('ConfigMap');
const services = ofKind<IService>('Service');
const policies = ofKind<INetworkPolicy>('NetworkPolicy');

const SERVICES = {
  'control-plane': { replicas: 2, needs: ['NATS_URL', 'DATABASE_URL', 'VLT_MASTER_KEY', 'PUBLIC_BASE_URL'] },
  'data-plane': { replicas: 3, needs: ['NATS_URL', 'PUBLIC_BASE_URL'] },
  audit: { replicas: 1, needs: ['NATS_URL', 'DATABASE_URL'] },
  notifier: { replicas: 1, needs: ['NATS_URL', 'DATABASE_URL'] },
} as const;
type ServiceName = keyof typeof SERVICES;
const SERVICE_NAMES = Object.keys(SERVICES) as ServiceName[];

function deploymentOf(service: ServiceName): IDeployment {
  return named(deployments, `vlt-${service}`);
}

/** The single element of a list; fails the test when there are none or several. */
function only<T>(items: T[], what: string): T {
  expect(items, what).toHaveLength(1);
  return items[0] as T;
}

function podSpec(d: IDeployment): PodSpec {
  const spec = d.spec?.template.spec;
  if (!spec) throw new Error(`${d.metadata?.name}: no pod spec`);
  return spec;
}

function podLabels(d: IDeployment): Record<string, string> {
  return d.spec?.template.metadata?.labels ?? {};
}

function allContainers(spec: PodSpec): Container[] {
  return [...(spec.initContainers ?? []), ...spec.containers];
}

/** Only matchLabels is used here; a selector with expressions is rejected rather than half-evaluated. */
function selects(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  if (selector.matchExpressions?.length) throw new Error('matchExpressions are not evaluated by this test');
  return Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
}

function isEmptySelector(selector: LabelSelector | undefined): boolean {
  return (
    !!selector &&
    Object.keys(selector.matchLabels ?? {}).length === 0 &&
    (selector.matchExpressions ?? []).length === 0
  );
}

/** The environment variable names a container ends up with, and the Secrets it reads them from. */
function environmentOf(spec: PodSpec, c: Container): { names: Set<string>; secretNames: Set<string> } {
  const names = new Set<string>();
  const secretNames = new Set<string>();
  for (const e of c.env ?? []) {
    names.add(e.name);
    const ref = e.valueFrom?.secretKeyRef;
    if (ref) secretNames.add(ref.name ?? '');
  }
  for (const src of c.envFrom ?? []) {
    const prefix = src.prefix ?? '';
    if (src.secretRef) {
      secretNames.add(src.secretRef.name ?? '');
      const data = named(secrets, src.secretRef.name ?? '');
      for (const k of [...Object.keys(data.stringData ?? {}), ...Object.keys(data.data ?? {})]) {
        names.add(prefix + k);
      }
    }
    if (src.configMapRef) {
      const data = named(configMaps, src.configMapRef.name ?? '');
      for (const k of Object.keys(data.data ?? {})) names.add(prefix + k);
    }
  }
  // Secrets mounted as files count too: their keys would be readable inside the pod.
  for (const v of spec.volumes ?? []) {
    if (v.secret) secretNames.add(v.secret.secretName ?? '');
    for (const p of v.projected?.sources ?? []) if (p.secret) secretNames.add(p.secret.name ?? '');
  }
  return { names, secretNames };
}

function secretKeys(name: string): string[] {
  const s = named(secrets, name);
  return [...Object.keys(s.stringData ?? {}), ...Object.keys(s.data ?? {})];
}

function envValue(c: Container, name: string): string | undefined {
  return c.env?.find((e) => e.name === name)?.value;
}

/** Resolves a probe's or Service's port (number or container port name) to a number. */
function resolvePort(port: number | string | undefined, c: Container): number | undefined {
  if (typeof port === 'number') return port;
  return c.ports?.find((p) => p.name === port)?.containerPort;
}

function expectHealthProbe(probe: Probe | undefined, c: Container, what: string): void {
  expect(probe, what).toBeDefined();
  expect(probe?.httpGet?.path, what).toBe('/health');
  expect(resolvePort(probe?.httpGet?.port, c), what).toBe(8080);
}

function portMatches(ports: RulePort[] | undefined, port: number, protocol = 'TCP'): boolean {
  if (!ports || ports.length === 0) return true; // no ports listed: every port
  return ports.some((p) => {
    if ((p.protocol ?? 'TCP') !== protocol) return false;
    if (p.port === undefined) return true;
    if (typeof p.port === 'string') throw new Error('named ports in NetworkPolicies are not evaluated');
    return p.endPort !== undefined ? port >= p.port && port <= p.endPort : p.port === port;
  });
}

/** The policies that apply to a pod and have the given direction. */
function policiesFor(labels: Record<string, string>, type: 'Ingress' | 'Egress'): INetworkPolicy[] {
  return policies.filter((p) => selects(p.spec?.podSelector, labels) && p.spec?.policyTypes?.includes(type));
}

/** The peers a pod may send to on a port; an empty `to` (all destinations) yields `'anywhere'`. */
function egressPeers(labels: Record<string, string>, port: number, protocol = 'TCP'): (Peer | 'anywhere')[] {
  return policiesFor(labels, 'Egress')
    .flatMap((p) => p.spec?.egress ?? [])
    .filter((r) => portMatches(r.ports, port, protocol))
    .flatMap((r): (Peer | 'anywhere')[] => (r.to && r.to.length > 0 ? r.to : ['anywhere']));
}

function ingressPeers(labels: Record<string, string>, port: number): (Peer | 'anywhere')[] {
  return policiesFor(labels, 'Ingress')
    .flatMap((p) => p.spec?.ingress ?? [])
    .filter((r) => portMatches(r.ports, port))
    .flatMap((r): (Peer | 'anywhere')[] => (r.from && r.from.length > 0 ? r.from : ['anywhere']));
}

function isPodPeer(peer: Peer | 'anywhere', appName: string): boolean {
  return (
    peer !== 'anywhere' &&
    !peer.namespaceSelector &&
    !peer.ipBlock &&
    peer.podSelector?.matchLabels?.['app.kubernetes.io/name'] === appName
  );
}

function isNamespacePeer(peer: Peer | 'anywhere', namespace: string): boolean {
  return (
    peer !== 'anywhere' &&
    !peer.ipBlock &&
    peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] === namespace
  );
}

function isPublicInternetPeer(peer: Peer | 'anywhere'): boolean {
  return (
    peer !== 'anywhere' &&
    peer.ipBlock?.cidr === '0.0.0.0/0' &&
    PRIVATE_RANGES.every((r) => peer.ipBlock?.except?.includes(r))
  );
}

describe('deploy/k8s manifests', () => {
  it('every document is a known kind and passes its Kubernetes schema', () => {
    expect(manifests.length).toBeGreaterThan(0);
    for (const m of manifests) {
      const where = `${m.file}: ${m.kind}/${m.metadata?.name}`;
      const Model = MODELS[`${m.apiVersion}/${m.kind}`];
      if (!Model) throw new Error(`${where}: unknown apiVersion/kind ${m.apiVersion}/${m.kind}`);
      const { file: _file, ...data } = m;
      expect(() => new Model(data as never).validate(), where).not.toThrow();
      expect(m.metadata?.name, where).toBeTruthy();
    }
  });

  it('schema validation rejects an invalid field type', () => {
    const invalid = new Deployment({
      metadata: { name: 'broken' },
      spec: {
        replicas: 'three' as unknown as number,
        selector: { matchLabels: { app: 'broken' } },
        template: {
          metadata: { labels: { app: 'broken' } },
          spec: { containers: [{ name: 'c', image: IMAGE }] },
        },
      },
    });
    expect(() => invalid.validate()).toThrow();
  });

  it('places every namespaced object in the gateway namespace, with unique names per kind', () => {
    expect(ofKind('Namespace').map((n) => (n as Manifest).metadata.name)).toEqual([NAMESPACE]);
    const seen = new Set<string>();
    for (const m of manifests.filter((x) => x.kind !== 'Namespace')) {
      expect(m.metadata.namespace, `${m.kind}/${m.metadata.name}`).toBe(NAMESPACE);
      const key = `${m.kind}/${m.metadata.name}`;
      expect(seen.has(key), `duplicate ${key}`).toBe(false);
      seen.add(key);
    }
  });

  describe('1. secrets and configuration', () => {
    it('Secrets hold only REPLACE_ME placeholders, split by reader', () => {
      expect(secrets.map((s) => s.metadata?.name).sort()).toEqual(['vlt-control-plane', 'vlt-database']);
      for (const s of secrets) {
        expect(s.data, `${s.metadata?.name} must not carry real (base64) data`).toBeUndefined();
        const values = Object.values(s.stringData ?? {});
        expect(values.length).toBeGreaterThan(0);
        for (const v of values) expect(v, s.metadata?.name).toContain('REPLACE_ME');
      }
      expect(secretKeys('vlt-control-plane').sort()).toEqual(['DATABASE_URL', 'VLT_MASTER_KEY']);
      expect(secretKeys('vlt-database')).toEqual(['DATABASE_URL']);
    });

    it('the vlt-common ConfigMap holds the shared, non-secret settings', () => {
      const common = named(configMaps, 'vlt-common');
      expect(common.data).toMatchObject({
        NATS_URL: expect.any(String),
        PUBLIC_BASE_URL: expect.any(String),
      });
      for (const cm of configMaps) {
        for (const k of FORBIDDEN_FOR_DATA_PLANE) expect(Object.keys(cm.data ?? {})).not.toContain(k);
      }
    });

    it.each(SERVICE_NAMES)('%s gets exactly the environment it needs', (service) => {
      const d = deploymentOf(service);
      const spec = podSpec(d);
      for (const c of spec.containers) {
        const { names } = environmentOf(spec, c);
        for (const need of SERVICES[service].needs)
          expect([...names], `${service} needs ${need}`).toContain(need);
        expect(envValue(c, 'SERVICE')).toBe(service);
        expect(envValue(c, 'PORT')).toBe('8080');
        if (!(SERVICES[service].needs as readonly string[]).includes('VLT_MASTER_KEY')) {
          expect([...names], `${service} must not get the master key`).not.toContain('VLT_MASTER_KEY');
        }
      }
    });

    it('the data plane can reach neither DATABASE_URL nor VLT_MASTER_KEY, directly or through a Secret', () => {
      const d = deploymentOf('data-plane');
      const spec = podSpec(d);
      for (const c of allContainers(spec)) {
        const { names, secretNames } = environmentOf(spec, c);
        for (const k of FORBIDDEN_FOR_DATA_PLANE) expect([...names]).not.toContain(k);
        for (const e of c.env ?? []) {
          const key = e.valueFrom?.secretKeyRef?.key ?? e.valueFrom?.configMapKeyRef?.key;
          if (key) expect(FORBIDDEN_FOR_DATA_PLANE).not.toContain(key);
        }
        for (const s of secretNames) {
          // An unknown Secret could hold anything: it must be one of ours, and clean.
          const keys = secretKeys(s);
          for (const k of FORBIDDEN_FOR_DATA_PLANE)
            expect(keys, `data plane reads Secret ${s}`).not.toContain(k);
        }
      }
    });
  });

  describe('2. deployments', () => {
    it('exist for the four services with the expected replica counts', () => {
      expect(deployments.map((d) => d.metadata?.name).sort()).toEqual(
        SERVICE_NAMES.map((s) => `vlt-${s}`).sort(),
      );
      for (const s of SERVICE_NAMES) expect(deploymentOf(s).spec?.replicas, s).toBe(SERVICES[s].replicas);
    });

    it('pin the image tag everywhere, never latest', () => {
      for (const d of deployments) {
        for (const c of allContainers(podSpec(d))) {
          const image = c.image ?? '';
          // A tag is a ':' after the last '/' (a registry port comes before it).
          const tag = image.slice(image.lastIndexOf('/') + 1).split(':')[1];
          expect(tag, `${c.name}: ${image}`).toBeTruthy();
          expect(tag, `${c.name}: ${image}`).not.toBe('latest');
          expect(image).toBe(IMAGE);
        }
      }
    });

    it.each(SERVICE_NAMES)('%s: labels, probes, resources, hardening, /tmp, metrics', (service) => {
      const d = deploymentOf(service);
      const spec = podSpec(d);
      const expectedLabels = {
        'app.kubernetes.io/name': `vlt-${service}`,
        'app.kubernetes.io/part-of': 'vlt-gateway',
        'app.kubernetes.io/component': service,
      };
      expect(d.metadata?.labels).toMatchObject(expectedLabels);
      expect(podLabels(d)).toMatchObject(expectedLabels);
      expect(selects(d.spec?.selector, podLabels(d))).toBe(true);

      expect(spec.automountServiceAccountToken).toBe(false);
      expect(spec.terminationGracePeriodSeconds ?? 30).toBeGreaterThanOrEqual(30);
      expect(spec.securityContext).toMatchObject({
        runAsNonRoot: true,
        runAsUser: 1000,
        fsGroup: 1000,
        seccompProfile: { type: 'RuntimeDefault' },
      });

      for (const c of allContainers(spec)) {
        expectHealthProbe(c.readinessProbe, c, `${service} readiness`);
        expectHealthProbe(c.livenessProbe, c, `${service} liveness`);
        expect(c.startupProbe, `${service} startup`).toBeDefined();
        // Liveness must be more patient than readiness: a pod leaves rotation before it is killed.
        expect(c.livenessProbe?.failureThreshold ?? 3).toBeGreaterThan(
          c.readinessProbe?.failureThreshold ?? 3,
        );

        for (const kind of ['requests', 'limits'] as const) {
          expect(c.resources?.[kind]?.cpu, `${service} ${kind}.cpu`).toBeDefined();
          expect(c.resources?.[kind]?.memory, `${service} ${kind}.memory`).toBeDefined();
        }

        expect(c.securityContext).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
        expect(c.securityContext?.privileged ?? false).toBe(false);

        const tmp = c.volumeMounts?.find((m) => m.mountPath === '/tmp');
        expect(tmp, `${service} /tmp mount`).toBeDefined();
        expect(spec.volumes?.find((v) => v.name === tmp?.name)?.emptyDir).toBeDefined();

        expect(envValue(c, 'VLT_METRICS_PORT')).toBe('9464');
        expect(c.ports).toEqual(
          expect.arrayContaining([
            expect.objectContaining({ name: 'http', containerPort: 8080 }),
            expect.objectContaining({ name: 'metrics', containerPort: 9464 }),
          ]),
        );
      }
    });
  });

  it.each(SERVICE_NAMES)('3. %s has a Service: 80 -> 8080 (http) and 9464 (metrics)', (service) => {
    const d = deploymentOf(service);
    const c = only(podSpec(d).containers, `${service} containers`);
    const svc = named(services, `vlt-${service}`);
    expect(Object.keys(svc.spec?.selector ?? {}).length).toBeGreaterThan(0);
    expect(selects({ matchLabels: svc.spec?.selector }, podLabels(d))).toBe(true);
    const http = svc.spec?.ports?.find((p) => p.name === 'http');
    expect(http?.port).toBe(80);
    expect(resolvePort(http?.targetPort, c)).toBe(8080);
    const metrics = svc.spec?.ports?.find((p) => p.name === 'metrics');
    expect(metrics?.port).toBe(9464);
    expect(resolvePort(metrics?.targetPort ?? metrics?.port, c)).toBe(9464);
  });

  it('4. the data plane autoscales on CPU from 3 to 20 replicas', () => {
    const hpas = ofKind<IHorizontalPodAutoscaler>('HorizontalPodAutoscaler');
    const spec = only(hpas, 'HorizontalPodAutoscalers').spec;
    expect(spec?.scaleTargetRef).toMatchObject({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: 'vlt-data-plane',
    });
    expect(spec?.minReplicas).toBe(3);
    expect(spec?.maxReplicas).toBe(20);
    expect(spec?.metrics).toContainEqual({
      type: 'Resource',
      resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } },
    });
  });

  it('5. control plane and data plane have a PodDisruptionBudget that still lets nodes drain', () => {
    const pdbs = ofKind<IPodDisruptionBudget>('PodDisruptionBudget');
    for (const service of ['control-plane', 'data-plane'] as const) {
      const d = deploymentOf(service);
      const matching = pdbs.filter((p) => selects(p.spec?.selector, podLabels(d)));
      const { minAvailable, maxUnavailable } = only(matching, `${service} PodDisruptionBudgets`).spec ?? {};
      expect((minAvailable === undefined) !== (maxUnavailable === undefined), service).toBe(true);
      if (minAvailable !== undefined) expect(minAvailable).toBeLessThan(SERVICES[service].replicas);
      if (maxUnavailable !== undefined) expect(maxUnavailable).toBeGreaterThanOrEqual(1);
    }
  });

  describe('6. network policies', () => {
    it('deny all ingress and egress by default', () => {
      const deny = policies.filter(
        (p) =>
          isEmptySelector(p.spec?.podSelector) &&
          p.spec?.policyTypes?.includes('Ingress') &&
          p.spec?.policyTypes?.includes('Egress') &&
          !p.spec?.ingress?.length &&
          !p.spec?.egress?.length,
      );
      expect(deny).toHaveLength(1);
    });

    it('allow DNS (UDP and TCP 53) to kube-system for every pod', () => {
      const dns = policies.filter((p) => isEmptySelector(p.spec?.podSelector));
      for (const protocol of ['UDP', 'TCP']) {
        const ok = dns.some((p) =>
          (p.spec?.egress ?? []).some(
            (r) =>
              portMatches(r.ports, 53, protocol) &&
              (r.to ?? []).some((peer) => isNamespacePeer(peer, 'kube-system')),
          ),
        );
        expect(ok, `DNS over ${protocol}`).toBe(true);
      }
    });

    it('never allow egress to all destinations, nor to the internet without excluding private ranges', () => {
      for (const service of SERVICE_NAMES) {
        const labels = podLabels(deploymentOf(service));
        for (const r of policiesFor(labels, 'Egress').flatMap((p) => p.spec?.egress ?? [])) {
          expect(r.to?.length ?? 0, `${service}: egress rule without destinations`).toBeGreaterThan(0);
          for (const peer of r.to ?? []) {
            if (peer.ipBlock?.cidr === '0.0.0.0/0') expect(isPublicInternetPeer(peer), service).toBe(true);
          }
        }
      }
    });

    it('the data plane reaches NATS and the internet on 443, and never PostgreSQL', () => {
      const labels = podLabels(deploymentOf('data-plane'));
      expect(egressPeers(labels, 4222).some((p) => isPodPeer(p, 'nats'))).toBe(true);
      expect(egressPeers(labels, 443).some(isPublicInternetPeer)).toBe(true);
      // No rule may allow 5432 at all, whatever the peer.
      expect(egressPeers(labels, 5432)).toEqual([]);
    });

    it.each(['control-plane', 'audit', 'notifier'] as const)('%s reaches PostgreSQL and NATS', (service) => {
      const labels = podLabels(deploymentOf(service));
      expect(egressPeers(labels, 5432).some((p) => isPodPeer(p, 'postgres'))).toBe(true);
      expect(egressPeers(labels, 4222).some((p) => isPodPeer(p, 'nats'))).toBe(true);
    });

    it('control plane and notifier reach the internet on 443; audit does not', () => {
      for (const service of ['control-plane', 'notifier'] as const) {
        expect(egressPeers(podLabels(deploymentOf(service)), 443).some(isPublicInternetPeer), service).toBe(
          true,
        );
      }
      expect(egressPeers(podLabels(deploymentOf('audit')), 443)).toEqual([]);
    });

    it.each(SERVICE_NAMES)(
      '%s accepts HTTP only from ingress-nginx and metrics only from monitoring',
      (service) => {
        const labels = podLabels(deploymentOf(service));
        const http = ingressPeers(labels, 8080);
        if (service === 'control-plane' || service === 'data-plane') {
          expect(http.length).toBeGreaterThan(0);
          for (const p of http) expect(isNamespacePeer(p, 'ingress-nginx'), JSON.stringify(p)).toBe(true);
        } else {
          expect(http).toEqual([]);
        }
        const metrics = ingressPeers(labels, 9464);
        expect(metrics.length).toBeGreaterThan(0);
        for (const p of metrics) expect(isNamespacePeer(p, 'monitoring'), JSON.stringify(p)).toBe(true);
        // Nothing else is open: every ingress rule names its ports and its sources.
        for (const r of policiesFor(labels, 'Ingress').flatMap((p) => p.spec?.ingress ?? [])) {
          expect(r.ports?.length ?? 0).toBeGreaterThan(0);
          expect(r.from?.length ?? 0).toBeGreaterThan(0);
          for (const port of r.ports ?? []) expect([8080, 9464]).toContain(port.port);
        }
      },
    );
  });

  describe('7. ingress', () => {
    const ingresses = ofKind<IIngress>('Ingress');

    it('routes /v1/vault and /v1/llm to the data plane and everything else to the control plane', () => {
      const spec = only(ingresses, 'Ingresses').spec;
      expect(spec?.ingressClassName).toBe('nginx');
      const paths = (spec?.rules ?? []).flatMap((r) => r.http?.paths ?? []);
      const route = (path: string) => paths.find((p) => p.path === path);
      for (const [path, backend] of [
        ['/v1/vault', 'vlt-data-plane'],
        ['/v1/llm', 'vlt-data-plane'],
        ['/', 'vlt-control-plane'],
      ] as const) {
        expect(route(path)?.pathType, path).toBe('Prefix');
        expect(route(path)?.backend.service?.name, path).toBe(backend);
      }
      // Every backend must be a port the Service actually exposes.
      for (const p of paths) {
        const svc = named(services, p.backend.service?.name ?? '');
        const port = p.backend.service?.port;
        const exposed = svc.spec?.ports?.some((sp) => sp.name === port?.name || sp.port === port?.number);
        expect(exposed, `${p.path} -> ${svc.metadata?.name}`).toBe(true);
      }
    });

    it('terminates TLS for every host, matching PUBLIC_BASE_URL', () => {
      const spec = only(ingresses, 'Ingresses').spec;
      const tlsHosts = (spec?.tls ?? []).flatMap((t) => {
        expect(t.secretName).toBeTruthy();
        return t.hosts ?? [];
      });
      expect(tlsHosts.length).toBeGreaterThan(0);
      for (const r of spec?.rules ?? []) expect(tlsHosts).toContain(r.host);
      const publicUrl = new URL(named(configMaps, 'vlt-common').data?.PUBLIC_BASE_URL ?? '');
      expect(publicUrl.protocol).toBe('https:');
      expect(tlsHosts).toContain(publicUrl.hostname);
    });

    it('does not buffer streams', () => {
      expect(only(ingresses, 'Ingresses').metadata?.annotations).toMatchObject({
        'nginx.ingress.kubernetes.io/proxy-buffering': 'off',
        'nginx.ingress.kubernetes.io/proxy-request-buffering': 'off',
        'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600',
        'nginx.ingress.kubernetes.io/proxy-body-size': '12m',
      });
    });
  });
});
