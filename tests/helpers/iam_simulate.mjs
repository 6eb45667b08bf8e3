// Judges IAM requests with @cloud-copilot/iam-simulate, for tests/helpers/iam.py.
// Usage: node iam_simulate.mjs <file URL of iam-simulate's ESM index>
// Reads one JSON request per line on stdin:
//   {"principal", "policies": {name: document}, "resourcePolicy"?, "action", "resource", "context"}
// and writes one JSON answer per line: {"allowed": bool, "result": "...", "errors"?}.
import { createInterface } from 'node:readline'

const { runSimulation } = await import(process.argv[2])
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })

for await (const line of lines) {
  if (!line.trim()) continue
  const q = JSON.parse(line)
  const simulation = {
    identityPolicies: Object.entries(q.policies).map(([name, policy]) => ({ name, policy })),
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    request: {
      principal: q.principal,
      action: q.action,
      resource: { resource: q.resource, accountId: q.account },
      contextVariables: q.context,
    },
  }
  if (q.resourcePolicy) simulation.resourcePolicy = q.resourcePolicy
  let answer
  try {
    const r = await runSimulation(simulation, {})
    if (r.errors) answer = { allowed: false, result: 'SimulationError', errors: r.errors }
    else answer = { allowed: r.overallResult === 'Allowed', result: r.overallResult }
  } catch (e) {
    answer = { allowed: false, result: 'SimulationError', errors: String(e) }
  }
  process.stdout.write(JSON.stringify(answer) + '\n')
}
