// Stand-in for actions/upload-artifact@v4 in the act harness (see action.yml). Same inputs,
// same client library, same artifact layout (paths relative to the search root). One extra for
// the harness: each file's owner is logged ("act-e2e: owner ..."), since act removes the
// workspace copy when the job ends and the report files must belong to the workspace's owner.
'use strict'
const fs = require('fs')
const path = require('path')
const core = require('@actions/core')
const glob = require('@actions/glob')
const {DefaultArtifactClient} = require('@actions/artifact')

function searchRoot(searchPaths) {
  if (searchPaths.length === 1) {
    const only = searchPaths[0]
    return fs.existsSync(only) && fs.statSync(only).isFile() ? path.dirname(only) : only
  }
  let root = searchPaths[0].split(path.sep)
  for (const other of searchPaths.slice(1)) {
    const parts = other.split(path.sep)
    let i = 0
    while (i < root.length && i < parts.length && root[i] === parts[i]) i++
    root = root.slice(0, i)
  }
  return root.join(path.sep) || path.sep
}

async function main() {
  const name = core.getInput('name') || 'artifact'
  const patterns = core.getInput('path', {required: true})
  const ifNoFiles = core.getInput('if-no-files-found') || 'warn'
  const hidden = core.getBooleanInput('include-hidden-files')
  const retentionDays = parseInt(core.getInput('retention-days') || '0', 10)
  const compressionLevel = parseInt(core.getInput('compression-level') || '6', 10)

  const globber = await glob.create(patterns, {excludeHiddenFiles: !hidden})
  const files = (await globber.glob()).filter(f => fs.statSync(f).isFile())
  if (files.length === 0) {
    const message = `No files were found with the provided path: ${patterns}. No artifacts will be uploaded.`
    if (ifNoFiles === 'error') core.setFailed(message)
    else if (ifNoFiles === 'warn') core.warning(message)
    else core.info(message)
    return
  }
  const root = searchRoot(globber.getSearchPaths())
  const workspace = process.env.GITHUB_WORKSPACE || process.cwd()
  const ws = fs.statSync(workspace)
  core.info(`act-e2e: owner workspace uid=${ws.uid} gid=${ws.gid}`)
  for (const file of files) {
    const st = fs.statSync(file)
    core.info(`act-e2e: owner ${path.relative(workspace, file)} uid=${st.uid} gid=${st.gid}`)
  }
  core.info(`With the provided path, there will be ${files.length} file(s) uploaded`)
  const client = new DefaultArtifactClient()
  if (core.getBooleanInput('overwrite')) {
    await client.deleteArtifact(name).catch(error => core.debug(`not deleted: ${error.message}`))
  }
  const options = {compressionLevel}
  if (retentionDays) options.retentionDays = retentionDays
  const uploaded = await client.uploadArtifact(name, files, root, options)
  core.info(`Artifact ${name} has been successfully uploaded! Final size is ${uploaded.size} bytes. Artifact ID is ${uploaded.id}`)
  core.setOutput('artifact-id', uploaded.id)
  core.setOutput('artifact-digest', uploaded.digest)
  const server = process.env.GITHUB_SERVER_URL || 'https://github.com'
  core.setOutput(
    'artifact-url',
    `${server}/${process.env.GITHUB_REPOSITORY}/actions/runs/${process.env.GITHUB_RUN_ID}/artifacts/${uploaded.id}`
  )
}

main().catch(error => core.setFailed(error.message))
