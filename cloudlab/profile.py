"""r2bench: GPU nodes on experiment LANs (one LAN per NIC rail), ready for `r2bench`.

Instructions:
Every node runs `cloudlab/node-setup.sh` once at boot (as root): build tools, Open MPI,
rdma-core / infiniband-diags / perftest, iproute2, nftables, and a shared ssh key so the nodes
reach each other without a password. Wait for `/var/lib/r2bench/node-setup.done` on every node
(it holds 0 when everything installed), then follow cloudlab/README.md from section 3, "A
testbed file from the manifest".
"""

# Run it to see the request: `python cloudlab/profile.py --nodeCount 2 --hwType d7525`.

import base64
import os
import sys

try:
    import geni.portal as portal
except SyntaxError:  # PyPI's geni-lib 0.9.9.4 keeps Python 2 prints in geni/portal.py
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from geni_compat import BytesTolerantStdout, load_portal

    portal = load_portal()
    sys.stdout = BytesTolerantStdout(sys.stdout)  # its writeXML writes bytes
import geni.rspec.pg as pg

UBUNTU22 = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"
SETUP_SCRIPT = "node-setup.sh"
SETUP_LOG = "/var/log/r2bench-node-setup.log"
MAX_LANS = 16

pc = portal.Context()
pc.defineParameter(
    "nodeCount",
    "Number of nodes",
    portal.ParameterType.INTEGER,
    2,
    longDescription="r2bench needs at least 2 nodes to fault a NIC between them.",
)
pc.defineParameter(
    "hwType",
    "Hardware type",
    portal.ParameterType.NODETYPE,
    "d7525",
    longDescription="A CloudLab node type with GPUs (types change; check the cluster's list).",
)
pc.defineParameter(
    "osImage",
    "Disk image",
    portal.ParameterType.IMAGE,
    UBUNTU22,
    longDescription="URN of the disk image; use one with the GPU driver and CUDA if you have it.",
)
pc.defineParameter(
    "lanCount",
    "Experiment LANs (one per NIC rail)",
    portal.ParameterType.INTEGER,
    1,
    longDescription="Each LAN takes one interface of every node: LAN k is rail k "
    "(subnet 10.{10+k}.0.0/24, node i at .{i+1}). 0 = control network only.",
)
pc.defineParameter(
    "linkSpeed",
    "LAN link speed (kbps, 0 = whatever the hardware gives)",
    portal.ParameterType.BANDWIDTH,
    0,
    longDescription="100 Gb/s = 100000000 kbps. 0 asks for best effort.",
)
params = pc.bindParameters()

if params.nodeCount < 1:
    pc.reportError(portal.ParameterError("At least one node is needed", ["nodeCount"]))
if not 0 <= params.lanCount <= MAX_LANS:
    pc.reportError(portal.ParameterError(f"0 to {MAX_LANS} LANs", ["lanCount"]))
if params.linkSpeed < 0:
    pc.reportError(portal.ParameterError("Link speed is in kbps, >= 0", ["linkSpeed"]))
pc.verifyParameters()


def setup_command():
    """The startup command: node-setup.sh, carried inside the request (base64) so the profile
    works without the repository on the node."""
    here = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else "."
    path = os.path.join(here, SETUP_SCRIPT)
    with open(path, "rb") as handle:
        body = base64.b64encode(handle.read()).decode("ascii")
    target = "/var/tmp/r2bench-node-setup.sh"
    return (
        f"echo {body} | base64 -d | sudo tee {target} >/dev/null && "
        f"sudo bash {target} || echo 'r2bench node setup failed, see {SETUP_LOG}'"
    )


request = pc.makeRequestRSpec()
command = setup_command()
lans = []
for k in range(params.lanCount):
    lan = request.LAN(f"rail{k}")
    if params.linkSpeed > 0:
        lan.bandwidth = int(params.linkSpeed)
    else:
        lan.best_effort = True
    if params.nodeCount > 2:
        lan.link_multiplexing = False
    lans.append(lan)

for i in range(params.nodeCount):
    node = request.RawPC(f"node{i}")
    if params.hwType:
        node.hardware_type = params.hwType
    node.disk_image = params.osImage
    for k, lan in enumerate(lans):
        iface = node.addInterface(f"rail{k}")
        iface.addAddress(pg.IPv4Address(f"10.{10 + k}.0.{i + 1}", "255.255.255.0"))
        lan.addInterface(iface)
    node.addService(pg.Execute(shell="bash", command=command))

pc.printRequestRSpec(request)
