# shellcheck shell=bash
# Lab networks. Everything lives on addresses/links only the lab uses:
#  - management: host bridge sclab0 (10.77.0.1/24) <-> veth scm-<tag> <-> node's enP7s7
#  - interconnect: veth pairs named like the real ConnectX-7 ports, no addresses (the product
#    assigns them with netplan), MTU 9000; direct links for pairs, bridges inside the dedicated
#    netns sclab-fabric for the switch-like segment.
# No routes out, no NAT, ip_forward untouched.

ns_of() { echo "${LAB_NS_PREFIX}$1"; }

ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -x -- "$1" >/dev/null; }

ensure_ns() {
  local ns="$1"
  if ! ns_exists "${ns}"; then
    ip netns add "${ns}"
  fi
  ip -n "${ns}" link set lo up
}

ensure_mgmt_bridge() {
  if ! ip link show dev "${LAB_BRIDGE}" >/dev/null 2>&1; then
    ip link add name "${LAB_BRIDGE}" type bridge
  fi
  if ! ip -4 addr show dev "${LAB_BRIDGE}" | grep "inet ${LAB_BRIDGE_ADDR} " >/dev/null; then
    ip addr add "${LAB_BRIDGE_ADDR}" dev "${LAB_BRIDGE}"
  fi
  ip link set dev "${LAB_BRIDGE}" up
}

# Management link of one node: host side scm-<tag> on sclab0, node side enP7s7 in the node netns.
ensure_mgmt_link() {
  local node="$1" ns host_if
  ns="$(ns_of "${node}")"
  host_if="scm-$(node_tag "${node}")"
  if ! ip -n "${ns}" link show dev enP7s7 >/dev/null 2>&1; then
    ip link del dev "${host_if}" 2>/dev/null || true
    ip link add name "${host_if}" type veth peer name enP7s7 netns "${ns}"
  fi
  ip link set dev "${host_if}" master "${LAB_BRIDGE}"
  ip link set dev "${host_if}" up
}

# Cable between two nodes' ports of different names (a mesh or ring: port 0 of one node to port 1
# of the next): one veth pair, IFA in A's namespace, IFB in B's.
ensure_cable() {
  local a="$1" ifa="$2" b="$3" ifb="$4" nsa nsb
  nsa="$(ns_of "${a}")"; nsb="$(ns_of "${b}")"
  if ip -n "${nsa}" link show dev "${ifa}" >/dev/null 2>&1 && ip -n "${nsb}" link show dev "${ifb}" >/dev/null 2>&1; then
    return 0
  fi
  ip -n "${nsa}" link del dev "${ifa}" 2>/dev/null || true
  ip -n "${nsb}" link del dev "${ifb}" 2>/dev/null || true
  ip -n "${nsa}" link add name "${ifa}" mtu "${LAB_NIC_MTU}" type veth \
    peer name "${ifb}" netns "${nsb}" mtu "${LAB_NIC_MTU}"
  ip -n "${nsa}" link set dev "${ifa}" up
  ip -n "${nsb}" link set dev "${ifb}" up
}

# Direct cable between two nodes: same interface name on both ends.
ensure_direct_link() {
  ensure_cable "$1" "$3" "$2" "$3"
}

# The cables of a switchless topology, "NODE:PORT NODE:PORT" per line (lab/README.md, "Switchless
# topologies"): node k's enp1s0f0np0 to node k+1's enp1s0f1np1, around. ring-4-miscabled swaps
# the far ends of the first and third cables (a-b and c-d become a-d and c-b), as a hand that
# plugged two cables into the wrong Sparks would.
switchless_cables() {
  case "$1" in
    mesh-3) printf '%s\n' "spark-a:enp1s0f0np0 spark-b:enp1s0f1np1" "spark-b:enp1s0f0np0 spark-c:enp1s0f1np1" \
      "spark-c:enp1s0f0np0 spark-a:enp1s0f1np1" ;;
    ring-4) printf '%s\n' "spark-a:enp1s0f0np0 spark-b:enp1s0f1np1" "spark-b:enp1s0f0np0 spark-c:enp1s0f1np1" \
      "spark-c:enp1s0f0np0 spark-d:enp1s0f1np1" "spark-d:enp1s0f0np0 spark-a:enp1s0f1np1" ;;
    ring-4-miscabled) printf '%s\n' "spark-a:enp1s0f0np0 spark-d:enp1s0f1np1" "spark-b:enp1s0f0np0 spark-c:enp1s0f1np1" \
      "spark-c:enp1s0f0np0 spark-b:enp1s0f1np1" "spark-d:enp1s0f0np0 spark-a:enp1s0f1np1" ;;
    *) die "'$1' is not a switchless topology" ;;
  esac
}

ensure_fabric_bridge() {
  local br="$1"
  ensure_ns "${LAB_FABRIC_NS}"
  if ! ip -n "${LAB_FABRIC_NS}" link show dev "${br}" >/dev/null 2>&1; then
    ip -n "${LAB_FABRIC_NS}" link add name "${br}" mtu "${LAB_IC_MTU}" type bridge
  fi
  ip -n "${LAB_FABRIC_NS}" link set dev "${br}" mtu "${LAB_IC_MTU}" up
}

# Node port on a switch-like segment: node side IFNAME, fabric side <tag>-<bridge> on bridge BR.
ensure_fabric_port() {
  local node="$1" ifname="$2" br="$3" ns port
  ns="$(ns_of "${node}")"
  port="$(node_tag "${node}")-${br}"
  ensure_fabric_bridge "${br}"
  if ! ip -n "${ns}" link show dev "${ifname}" >/dev/null 2>&1; then
    ip -n "${LAB_FABRIC_NS}" link del dev "${port}" 2>/dev/null || true
    ip -n "${ns}" link add name "${ifname}" mtu "${LAB_NIC_MTU}" type veth \
      peer name "${port}" netns "${LAB_FABRIC_NS}" mtu "${LAB_IC_MTU}"
  fi
  ip -n "${LAB_FABRIC_NS}" link set dev "${port}" mtu "${LAB_IC_MTU}" master "${br}" up
  ip -n "${ns}" link set dev "${ifname}" up
}

# Interconnect cabling per topology (see lab/README.md).
ensure_interconnect() {
  local topology="$1"
  ensure_ns "${LAB_FABRIC_NS}"
  case "${topology}" in
    spark-pair)
      ensure_direct_link spark-a spark-b enp1s0f1np1
      ensure_direct_link spark-a spark-b enP2p1s0f1np1
      ;;
    spark-workstation)
      ensure_direct_link spark-a ws-a enp1s0f1np1
      # The Spark's twin of the same physical port has link but no peer (the workstation NIC
      # exposes one interface): it ends on an otherwise empty segment.
      ensure_fabric_port spark-a enP2p1s0f1np1 ic1
      ;;
    hetero-4)
      local n
      for n in spark-a spark-b thor-a thor-b; do
        ensure_fabric_port "${n}" enp1s0f1np1 ic0
      done
      for n in spark-a spark-b; do
        ensure_fabric_port "${n}" enP2p1s0f1np1 ic1
      done
      # The outsider is plugged into the same switch (no address: a test gives it one when it
      # needs to show that a non-member cannot join the Ray cluster or reach internal ports).
      ensure_fabric_port outsider enp1s0f1np1 ic0
      ;;
    mesh-3 | ring-4 | ring-4-miscabled)
      local a b
      while read -r a b; do
        ensure_cable "${a%%:*}" "${a#*:}" "${b%%:*}" "${b#*:}"
      done < <(switchless_cables "${topology}")
      ;;
    thor-switch-*)
      # Every Thor's one interconnect port on the switch ic0 (the size sweep of `npm run bench`).
      local n
      for n in $(topology_nodes "${topology}"); do
        [[ "${n}" == outsider ]] || ensure_fabric_port "${n}" enp1s0f1np1 ic0
      done
      ;;
    *) die "unknown topology '${topology}'" ;;
  esac
}

# A power cycle resets the node's NICs: no addresses, default MTU (the links stay: cables).
reset_node_links() {
  local node="$1" ns ifname
  ns="$(ns_of "${node}")"
  for ifname in $(ip -n "${ns}" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1); do
    [[ "${ifname}" == lo ]] && continue
    ip -n "${ns}" addr flush dev "${ifname}" 2>/dev/null || true
    ip -n "${ns}" link set dev "${ifname}" mtu "${LAB_NIC_MTU}" 2>/dev/null || true
  done
}

# Remove every network object the lab may have created, by the names it uses.
teardown_network() {
  local n ns
  for n in "${LAB_ALL_NODES[@]}"; do
    ns="$(ns_of "${n}")"
    if ns_exists "${ns}"; then ip netns del "${ns}"; fi
    ip link del dev "scm-$(node_tag "${n}")" 2>/dev/null || true
  done
  if ns_exists "${LAB_FABRIC_NS}"; then ip netns del "${LAB_FABRIC_NS}"; fi
  if ip link show dev "${LAB_BRIDGE}" >/dev/null 2>&1; then ip link del dev "${LAB_BRIDGE}"; fi
}
