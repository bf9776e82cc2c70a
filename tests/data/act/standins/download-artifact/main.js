// Stand-in for actions/download-artifact@v4 in the act harness (see action.yml). Same inputs
// and the same rules: `name` downloads one artifact into `path`; otherwise every artifact (or
// those matching `pattern`) into `path/<artifact name>`, or all into `path` with
// merge-multiple; with `github-token` the artifacts of run `run-id` in `repository`, through
// the REST API.
'use strict'
const os = require('os')
const path = require('path')
const core = require('@actions/core')
const {DefaultArtifactClient} = require('@actions/artifact')
const {Minimatch} = require('minimatch')

async function main() {
  const name = core.getInput('name')
  const ids = core.getInput('artifact-ids')
  const pattern = core.getInput('pattern')
  const mergeMultiple = core.getBooleanInput('merge-multiple')
  const token = core.getInput('github-token')
  let target = core.getInput('path') || process.env.GITHUB_WORKSPACE || process.cwd()
  if (target.startsWith('~')) target = target.replace('~', os.homedir())
  target = path.resolve(target)
  if (name && ids) throw new Error("Inputs 'name' and 'artifact-ids' cannot be used together.")

  const options = {}
  if (token) {
    const [repositoryOwner, repositoryName] = core.getInput('repository').split('/')
    if (!repositoryOwner || !repositoryName) {
      throw new Error(`Invalid repository: '${core.getInput('repository')}'. Must be in format owner/repo`)
    }
    const workflowRunId = parseInt(core.getInput('run-id'), 10)
    options.findBy = {token, workflowRunId, repositoryOwner, repositoryName}
  }
  const client = new DefaultArtifactClient()

  let artifacts
  if (name) {
    const {artifact} = await client.getArtifact(name, options)
    if (!artifact) throw new Error(`Artifact '${name}' not found`)
    artifacts = [artifact]
  } else {
    const listed = (await client.listArtifacts({latest: true, ...options})).artifacts
    if (ids) {
      const wanted = ids.split(',').map(id => parseInt(id.trim(), 10))
      artifacts = listed.filter(a => wanted.includes(a.id))
    } else if (pattern) {
      const matcher = new Minimatch(pattern)
      artifacts = listed.filter(a => matcher.match(a.name))
    } else {
      artifacts = listed
    }
  }
  for (const artifact of artifacts) {
    core.info(`- ${artifact.name} (ID: ${artifact.id}, Size: ${artifact.size}, Expected Digest: ${artifact.digest})`)
    const into = name || mergeMultiple ? target : path.join(target, artifact.name)
    const outcome = await client.downloadArtifact(artifact.id, {
      ...options,
      path: into,
      expectedHash: artifact.digest
    })
    if (outcome.digestMismatch) {
      core.warning(`Artifact '${artifact.name}' digest validation failed.`)
    }
  }
  core.info(`Total of ${artifacts.length} artifact(s) downloaded`)
  core.setOutput('download-path', target)
}

main().catch(error => core.setFailed(error.message))
