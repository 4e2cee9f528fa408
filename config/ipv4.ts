// IPv4 math for interconnect addresses: parsing, subnets, and the reasons an
// address cannot be used on an interface. Hand-rolled on purpose: it is small,
// table-tested, and the error messages need the reasons ipaddr.js does not give
// (network/broadcast address, /32, reserved ranges) in the user's words.

const HOSTNAME_LABEL = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
/** `address/prefix`, the prefix without leading zeros (nft refuses `10.0.0.0/08`). */
const PREFIXED = /^([^/]*)\/(0|[1-9][0-9]?)$/;

/** Parses a dotted-quad IPv4 address (no leading zeros) into a 32-bit number. */
export function parseIpv4(text: string): number | undefined {
    const parts = text.split(".");
    if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255)) {
        return undefined;
    }
    return parts.reduce((acc, p) => acc * 256 + Number(p), 0);
}

/** Formats a 32-bit number as a dotted-quad IPv4 address. */
export function formatIpv4(ip: number): string {
    return [24, 16, 8, 0].map((shift) => Math.floor(ip / 2 ** shift) % 256).join(".");
}

/** True for an IPv4 address or a DNS hostname. */
export function isHostOrIpv4(text: string): boolean {
    if (/^[0-9.]+$/.test(text)) {
        return parseIpv4(text) !== undefined;
    }
    return text.length <= 253 && text.split(".").every((label) => HOSTNAME_LABEL.test(label));
}

/** An interface address with its prefix length, and the subnet it lies in. */
export interface Cidr {
    /** The address as a 32-bit number. */
    ip: number;
    /** The prefix length, 1..31. */
    prefixLength: number;
    /** The subnet's network address as a 32-bit number. */
    network: number;
    /** The subnet's broadcast address as a 32-bit number. */
    broadcast: number;
}

/**
 * Whether a host is loopback: `localhost` or an IPv4 address in 127.0.0.0/8. A server bound to one
 * is reachable only on its node (through an SSH tunnel from elsewhere), so the firewall opens
 * nothing for it.
 */
export function isLoopback(host: string): boolean {
    if (host === "localhost") return true;
    const ip = parseIpv4(host);
    return ip !== undefined && Math.floor(ip / 2 ** 24) === 127;
}

/** The address a probe on the node itself asks a server listening on `listen` at: loopback for the wildcard 0.0.0.0. */
export function addressOnNode(listen: string): string {
    return listen === "0.0.0.0" ? "127.0.0.1" : listen;
}

/**
 * Why `text` is not a usable interconnect interface address (`a.b.c.d/prefix`), or undefined when
 * it is one: IPv4 only, prefix 1..31 (a /32 has no peer; a /31 is a point-to-point link), not a
 * loopback, multicast, reserved or "this network" address, and for prefixes up to /30 neither
 * the network nor the broadcast address of its subnet.
 */
export function interfaceAddressProblem(text: string): string | undefined {
    const match = PREFIXED.exec(text);
    if (!match) {
        return "must be an IPv4 address with its prefix length, a.b.c.d/prefix (the prefix without leading zeros)";
    }
    const ip = parseIpv4(match[1]);
    if (ip === undefined) {
        return `has ${JSON.stringify(match[1])}, which is not an IPv4 address (four numbers 0-255, no leading zeros)`;
    }
    const prefixLength = Number(match[2]);
    if (prefixLength === 32) {
        return "has prefix /32, which leaves no room for a peer on the link; use the link's prefix";
    }
    if (prefixLength < 1 || prefixLength > 32) {
        return `has prefix /${prefixLength}; the prefix length must be 1-31`;
    }
    const firstOctet = Math.floor(ip / 2 ** 24);
    if (firstOctet === 0 || firstOctet === 127 || firstOctet >= 224) {
        return "is a loopback, multicast, reserved or 'this network' address, not one an interface can use";
    }
    const cidr = parseCidr(text);
    const subnet = formatSubnet(cidr);
    if (prefixLength <= 30 && ip === cidr.network) {
        return `is the network address of ${subnet}; use a host address inside it`;
    }
    if (prefixLength <= 30 && ip === cidr.broadcast) {
        return `is the broadcast address of ${subnet}; use a host address inside it`;
    }
    return undefined;
}

/** Parses `a.b.c.d/prefix`; throws on text that {@link interfaceAddressProblem} would reject as malformed. */
export function parseCidr(text: string): Cidr {
    const [address, prefix] = text.split("/");
    const ip = parseIpv4(address);
    const prefixLength = Number(prefix);
    if (ip === undefined || !Number.isInteger(prefixLength) || prefixLength < 0 || prefixLength > 32) {
        throw new Error(`not an IPv4 address with prefix: ${text}`);
    }
    const size = 2 ** (32 - prefixLength);
    const network = Math.floor(ip / size) * size;
    return { ip, prefixLength, network, broadcast: network + size - 1 };
}

/** Formats the subnet of a {@link Cidr}: `192.168.100.0/24`. */
export function formatSubnet(cidr: Cidr): string {
    return `${formatIpv4(cidr.network)}/${cidr.prefixLength}`;
}

/** True when two subnets share at least one address. */
export function subnetsOverlap(a: Cidr, b: Cidr): boolean {
    return a.network <= b.broadcast && b.network <= a.broadcast;
}

/** Why `text` is not an IPv4 source range `a.b.c.d/prefix` (prefix 0..32, e.g. a LAN 192.168.1.0/24), or undefined. */
export function ipv4RangeProblem(text: string): string | undefined {
    const match = PREFIXED.exec(text);
    if (!match || parseIpv4(match[1]) === undefined || Number(match[2]) > 32) {
        return "must be an IPv4 range a.b.c.d/prefix, e.g. 192.168.1.0/24 (no leading zeros)";
    }
    return undefined;
}
