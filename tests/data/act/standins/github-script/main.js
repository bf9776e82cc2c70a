// Stand-in for actions/github-script@v7 in the act harness (see action.yml). The script is the
// body of an async function that gets what the real action gives it: require (Node's, resolving
// from the working directory), github (an authenticated Octokit with paginate and rest),
// context, core, exec, glob, io, fetch. Its return value is the `result` output.
'use strict'
const path = require('path')
const {createRequire} = require('module')
const core = require('@actions/core')
const exec = require('@actions/exec')
const glob = require('@actions/glob')
const io = require('@actions/io')
const {context, getOctokit} = require('@actions/github')

const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor

async function main() {
  const token = core.getInput('github-token', {required: true})
  const options = {userAgent: core.getInput('user-agent') || 'actions/github-script'}
  const baseUrl = core.getInput('base-url')
  if (baseUrl) options.baseUrl = baseUrl
  const previews = core.getInput('previews')
  if (previews) options.previews = previews.split(',')
  if (core.getBooleanInput('debug')) options.log = console
  const github = getOctokit(token, options)
  const script = core.getInput('script', {required: true})
  const scriptRequire = createRequire(path.join(process.cwd(), 'github-script.js'))
  const run = new AsyncFunction(
    'require', '__original_require__', 'github', 'octokit', 'context', 'core', 'exec', 'glob', 'io', 'fetch',
    script
  )
  const result = await run(scriptRequire, scriptRequire, github, github, context, core, exec, glob, io, fetch)
  let output
  if (core.getInput('result-encoding') === 'string') output = String(result)
  else output = result === undefined ? '' : JSON.stringify(result)
  core.setOutput('result', output)
}

main().catch(error => {
  core.error(error.stack || String(error))
  core.setFailed(`Unhandled error: ${error}`)
})
