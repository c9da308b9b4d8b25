"""Many commands at once over several sessions from one AsyncClient, one streamed."""
import asyncio
import sys

import sbsh


async def main() -> int:
    async with sbsh.AsyncClient() as c:
        results = await asyncio.gather(*(c.exec(f"echo {i}", session=f"example-{i % 4}") for i in range(20)))
        print(sum(int(r.text) for r in results))
        async for item in c.exec_stream("for i in 1 2 3; do echo $i; sleep 0.05; done", session="example-0"):
            if isinstance(item, sbsh.OutputChunk):
                print("chunk:", item.text.strip())
            else:
                print("exit code:", item.exit_code)
        for i in range(4):
            await c.remove_session(f"example-{i}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
